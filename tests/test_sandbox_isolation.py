"""Isolation between the cells of the style-check sandbox (rewards/sandbox/__init__.py).

Every cell (check x response) must be a function of its own check and response only: a check
that hangs, crashes, swallows its timeout or leaves memory behind costs its own cell and nothing
else, in the same call and in the next one, and the counters blame it rather than its victims.
Limits are small (0.2 s CPU, 64 MiB) so the file stays fast; the wall limit (1 s) is what a
loop inside C costs, and is generous because the checks here must not time out on a busy box.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator

import pytest

from rewards.sandbox import StyleSandbox, pool, static_rejection_reason, worker

pytestmark = pytest.mark.timeout(120)

CPU_SECONDS = 0.2
WALL_SECONDS = 1.0
MEMORY_MB = 64
BIG = 28 * 2**20  # one fits under MEMORY_MB next to the interpreter (about 15 MiB), two do not


def body(code: str) -> str:
    """A check whose body is ``code`` (written at 4-space indentation)."""
    return "def check(response):\n" + "".join(f"    {line}\n" for line in code.splitlines())


# Hostile checks: (name, source, outcome on the first response, outcome on later responses).
C_LOOP = body("return sum(range(10**15)) > 0")  # a loop inside C: the CPU timer cannot fire
DEEP_HASH = body("t = ()\nfor i in range(300000):\n    t = (t,)\nreturn t in {1}")  # segfault
SELF_REFERENCING_HOG = body(f"x = ['x' * {BIG}]\nx.append(x)\nreturn True")
BIG_ALLOCATION = body("return len('x' * 10**10) > 0")
FINALLY_CONTINUE = body("while True:\n    try:\n        while True:\n            pass\n"
                        "    finally:\n        continue")
HOSTILE = [
    ("c_loop", C_LOOP, "timed_out", "skipped"),
    ("deep_hash", DEEP_HASH, "crashed", "skipped"),
    ("self_referencing_hog", SELF_REFERENCING_HOG, "true", "true"),
    ("big_allocation", BIG_ALLOCATION, "raised", "raised"),
    ("finally_continue", FINALLY_CONTINUE, "rejected", "rejected"),
]

# Legitimate checks with the plain-Python function each must agree with. The last one needs
# BIG bytes of its own: it fails whenever the hog's memory is still around.
LEGIT: list[tuple[str, Callable[[str], bool]]] = [
    (body("return len(response.split()) < 5"), lambda r: len(r.split()) < 5),
    (body("return response.rstrip().endswith('.')"), lambda r: r.rstrip().endswith(".")),
    (body("return re.search(r'\\btwo\\b', response, re.I) is not None"),
     lambda r: re.search(r"\btwo\b", r, re.I) is not None),
    (body(f"return len('x' * {BIG}) == {BIG} and len(response) < 30"), lambda r: len(r) < 30),
]
RESPONSES = ["One two three.", "one two three four five six seven", "Two.", "a b"]


def expected_outcomes() -> list[list[str]]:
    hostile = [[first] + [later] * (len(RESPONSES) - 1) for _, _, first, later in HOSTILE]
    legit = [["true" if fn(r) else "false" for r in RESPONSES] for _, fn in LEGIT]
    return hostile + legit


@pytest.fixture()
def box() -> Iterator[StyleSandbox]:
    with StyleSandbox(cpu_seconds=CPU_SECONDS, wall_seconds=WALL_SECONDS,
                      memory_mb=MEMORY_MB) as sandbox:
        yield sandbox


def test_hostile_checks_in_the_batch_cost_only_their_own_cells(box: StyleSandbox) -> None:
    """Hostile checks run first on every response; every legitimate cell still scores what
    plain Python says, in this call and the next, and the counters blame the hostile cells."""
    sources = [source for _, source, _, _ in HOSTILE] + [source for source, _ in LEGIT]
    assert LEGIT[0][1]("One two three.")
    for call in range(2):
        before = box.counters.as_dict()
        outcomes = box.run_outcomes(sources, RESPONSES)
        after = box.counters.as_dict()
        assert outcomes == expected_outcomes(), f"call {call}"
        delta = {name: after[name] - before[name] for name in after}
        later = len(RESPONSES) - 1
        assert delta["timed_out"] == 1 and delta["crashed"] == 1, delta
        assert delta["skipped"] == 2 * later, delta  # the two disabled checks, nothing else
        assert delta["raised"] == len(RESPONSES), delta  # big allocation, never a victim
        assert delta["rejected"] == 1 and delta["non_bool"] == 0, delta
    assert box.run([source for source, _ in LEGIT], RESPONSES) == [
        [fn(r) for r in RESPONSES] for _, fn in LEGIT]


def test_run_agrees_with_run_outcomes(box: StyleSandbox) -> None:
    sources = [SELF_REFERENCING_HOG, BIG_ALLOCATION, LEGIT[0][0]]
    assert box.run(sources, RESPONSES[:2]) == [[True, True], [False, False], [True, False]]


def test_leftover_cycle_is_collected_before_the_next_cell(box: StyleSandbox) -> None:
    """The hog's list holds itself (and BIG bytes) after its cell; the next cell needs BIG too."""
    needs_big = LEGIT[3][0]
    for _ in range(3):
        assert box.run([SELF_REFERENCING_HOG, needs_big], ["a", "b"]) == [[True, True]] * 2
    assert box.counters.raised == 0 and box.counters.worker_restarts == 0


def test_finally_continue_is_rejected_statically() -> None:
    reason = static_rejection_reason(FINALLY_CONTINUE)
    assert reason is not None and "'continue' inside a 'finally'" in reason


def test_swallowed_timeout_ends_the_cell_at_the_next_tick() -> None:
    """A ``finally`` that raises turns the timeout into a ValueError the check catches: the
    static layer allows it; the worker reports the cell timed out at the timer's next tick,
    long before the (here 60 s) wall-clock kill."""
    swallower = body("while True:\n    try:\n        try:\n            while True:\n"
                     "                pass\n        finally:\n            raise ValueError('x')\n"
                     "    except ValueError:\n        pass")
    assert static_rejection_reason(swallower) is None
    with StyleSandbox(cpu_seconds=CPU_SECONDS, wall_seconds=60.0, memory_mb=MEMORY_MB) as box:
        box.run([LEGIT[0][0]], ["warm up"])
        start = time.monotonic()
        outcomes = box.run_outcomes([swallower, LEGIT[0][0]], ["a b", "c d"])
        assert time.monotonic() - start < 30.0
        assert outcomes == [["timed_out", "skipped"], ["true", "true"]]
        counts = box.counters
        assert (counts.timed_out, counts.crashed, counts.worker_restarts) == (1, 0, 1)


def test_every_cell_can_run_on_its_own_worker(box: StyleSandbox) -> None:
    """With a negative margin the worker is replaced after every cell: same results, and set
    order (hash seed) is the same in every worker of one sandbox (a random seed per worker
    would make all ten cells agree with probability 2**-9)."""
    set_order = body("return list({'alpha', 'beta'})[0] == 'alpha'")
    responses = [f"r{i}" for i in range(10)]
    box.recycle_margin_bytes = -(1 << 40)
    result = box.run([LEGIT[0][0], set_order], responses)
    assert result[0] == [True] * len(responses)
    assert len(set(result[1])) == 1
    cells = 2 * len(responses)
    assert box.counters.recycled == cells
    assert box.counters.worker_restarts == cells - 1


def test_compile_memory_error_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def flaky_compile(source: str, *args: object, **kwargs: object) -> object:
        calls.append(source)
        if len(calls) == 1:
            raise MemoryError
        return compile(source, *args, **kwargs)

    monkeypatch.setattr(worker, "compile", flaky_compile, raising=False)
    codes: dict[str, object] = {}
    source = LEGIT[0][0]
    assert worker.compiled(codes, source) is worker._COMPILE_FAILED
    assert source not in codes
    assert worker.compiled(codes, source) is not worker._COMPILE_FAILED
    broken = "def check(response):\n    continue\n"  # parses, but does not compile
    assert worker.compiled(codes, broken) is worker._COMPILE_FAILED
    assert codes[broken] is worker._COMPILE_FAILED


def _raw_batch(sources: list[str], margin_bytes: int) -> tuple[bytes | None, str]:
    """Unvalidated sources x one response straight to a worker: (its line, its statuses)."""
    raw = pool._Worker(MEMORY_MB * 2**20, startup_seconds=20.0, margin_bytes=margin_bytes)
    try:
        payload = {"cpu": CPU_SECONDS, "disable_after": 1, "responses": [[0, "r"]],
                   "checks": [[i, s] for i, s in enumerate(sources)],
                   "cells": [[0, i] for i in range(len(sources))]}
        assert raw.submit(json.dumps(payload).encode() + b"\n", len(sources), 10.0)
        line = raw.readline(10.0)
        return line, raw.statuses(0, raw.progress(len(sources)))
    finally:
        raw.kill()


def test_worker_layer_abandons_a_check_that_swallows_its_timeout() -> None:
    """Without the static layer, ``finally: continue`` is ended by the worker itself."""
    line, statuses = _raw_batch([FINALLY_CONTINUE, LEGIT[0][0]], pool.RECYCLE_MARGIN_BYTES)
    assert (line, statuses) == (worker.ABANDON, worker.TIMED_OUT)


def test_worker_layer_recycles_when_memory_stays_above_the_margin() -> None:
    line, statuses = _raw_batch([LEGIT[0][0], LEGIT[0][0] + "\n"], -(1 << 40))
    assert (line, statuses) == (worker.RECYCLE, worker.TRUE)
