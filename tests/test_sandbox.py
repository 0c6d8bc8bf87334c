"""Sandbox for model-written style checks (rewards/sandbox, RLVRR paper section 3.3).

Every hostile check must score False, leave the file system untouched, be counted, and leave the
sandbox able to score a benign check right after. Limits are short so the file stays fast.
Isolation between cells (hangs, crashes, leftover memory) is in tests/test_sandbox_isolation.py.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
from pathlib import Path

import pytest

from benchmarks.sandbox_probes import escaped, worker_status
from rewards import sandbox as sandbox_module
from rewards.sandbox import SandboxCounters, StyleSandbox, run_style_checks, static_rejection_reason

pytestmark = pytest.mark.timeout(60)

CPU_SECONDS = 0.1
WALL_SECONDS = 0.6

WORDS_AT_MOST_5 = "def check(response):\n    return len(response.split()) <= 5\n"


def body(code: str) -> str:
    """A check whose body is ``code`` (written at 4-space indentation)."""
    return "def check(response):\n" + "".join(f"    {line}\n" for line in code.splitlines())


# (source, counters that may record it). TARGET is a path that must never appear; SECRET is a
# readable file whose content a check only returns True for if it managed to read it.
HOSTILE = [
    ("read_file", body("return open('SECRET').read() == 'secret'"), {"rejected"}),
    ("write_file", body("open('TARGET', 'w').write('x')\nreturn True"), {"rejected"}),
    ("subclasses_chain", body("return len(().__class__.__base__.__subclasses__()) > 0"), {"rejected"}),
    ("subclasses_os", body(
        "for c in ().__class__.__base__.__subclasses__():\n"
        "    if c.__name__ == '_wrap_close':\n"
        "        c.__init__.__globals__['system']('touch TARGET')\n"
        "return True"), {"rejected"}),
    ("globals_of_check", body("return 'os' in check.__globals__"), {"rejected"}),
    ("getattr_chain", body("return getattr(getattr(response, '__class__'), '__base__') is not None"), {"rejected"}),
    ("builtins_dict", body("return __builtins__['open']('TARGET', 'w') is not None"), {"rejected"}),
    ("os_via_builtins", body(
        "os = __builtins__.__import__('os')\nreturn os.system('touch TARGET') == 0"), {"rejected"}),
    ("import_os", "import os\n" + body("return os.system('touch TARGET') == 0"), {"rejected"}),
    ("from_os_import", body("from os import system\nreturn system('touch TARGET') == 0"), {"rejected"}),
    ("os_fork", body("return os.fork() >= 0"), {"rejected"}),
    ("posix_fork", body("return posix.fork() >= 0"), {"raised"}),
    ("socket", body("return socket.create_connection(('127.0.0.1', 80)) is not None"), {"rejected"}),
    ("exec", body("exec(\"open('TARGET', 'w')\")\nreturn True"), {"rejected"}),
    ("eval", body("return eval('True')"), {"rejected"}),
    ("compile", body("return compile('True', 'x', 'eval') is not None"), {"rejected"}),
    ("lambda_code", body("return (lambda: 0).__code__ is not None"), {"rejected"}),
    ("lambda_default_globals", body("f = lambda g=check: g.__globals__\nreturn f() is not None"), {"rejected"}),
    ("type_new_class", body("T = type('T', (), {})\nreturn T is not None"), {"rejected"}),
    ("type_mro", body("return len(type(response).mro()) > 0"), {"rejected"}),
    ("exception_class_mro", body("return len(ValueError.mro()) > 0"), {"rejected"}),
    ("format_attribute", body("return '{0.__class__}'.format(response) != ''"), {"rejected"}),
    ("format_map_attribute", body("return '{x.__class__}'.format_map({'x': response}) != ''"), {"rejected"}),
    ("str_format_unbound", body("return str.format('{0.__class__.__mro__}', response) != ''"), {"rejected"}),
    ("generator_frame", body("g = (x for x in [1])\nreturn g.gi_frame.f_back.f_globals is not None"), {"rejected"}),
    ("frame_prefix_only", body("g = (x for x in [1])\nf = g.gi_frame\nreturn f is not None"), {"rejected"}),
    ("traceback_frame", body(
        "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    return e.__traceback__.tb_frame is not None"),
     {"rejected"}),
    ("attribute_assignment", body("re.search = lambda *a: True\nreturn True"), {"rejected"}),
    ("class_definition", "class X:\n    pass\n" + body("return True"), {"rejected"}),
    ("decorator", body("return True").replace("def check", "@len\ndef check"), {"rejected"}),
    ("generator_finally_hang",
     "def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n"
     + body("x = g()\nnext(x)\nreturn True"), {"rejected"}),
    ("finally_continue_swallows_timeout", body(
        "while True:\n    try:\n        while True:\n            pass\n    finally:\n        continue"),
     {"rejected"}),
    ("finally_return_swallows_timeout", body(
        "try:\n    while True:\n        pass\nfinally:\n    return True"), {"rejected"}),
    ("bare_except_swallows_timeout", body(
        "try:\n    while True:\n        pass\nexcept:\n    return True"), {"rejected"}),
    ("base_exception_swallows_timeout", body(
        "try:\n    while True:\n        pass\nexcept BaseException:\n    return True"), {"rejected"}),
    ("print_call", body("print('x')\nreturn True"), {"rejected"}),
    ("global_statement", body("global re\nre = None\nreturn True"), {"rejected"}),
    ("top_level_loop", "while True:\n    pass\n" + body("return True"), {"rejected"}),
    ("no_check_function", "def other(response):\n    return True\n", {"rejected"}),
    ("two_check_functions", body("return True") + body("return True"), {"rejected"}),
    # An always-True check that never runs its own code (issue 35): `check` rebound after its def.
    ("check_rebound_to_bool", body("return False") + "check = bool\n", {"rejected"}),
    ("check_rebound_by_walrus", body("return False") + "x = (check := bool)\n", {"rejected"}),
    ("check_rebound_in_comprehension", body("return False")
     + "x = [(check := bool) for _ in [0]]\n", {"rejected"}),
    ("syntax_error", "def check(response) return True", {"rejected"}),
    ("huge_source", body("return True") + "X = '" + "a" * 30_000 + "'\n", {"rejected"}),
    ("module_internals_json_codecs", body("return json.codecs.open('TARGET', 'w') is not None"), {"raised"}),
    ("module_internals_re", body("return re.enum is not None"), {"raised"}),
    ("infinite_loop", body("while True:\n    pass"), {"timed_out"}),
    ("timeout_caught_by_exception", body(
        "try:\n    while True:\n        pass\nexcept Exception:\n    return True"), {"timed_out"}),
    ("regex_backtracking", body("return re.match(r'(a+)+$', 'a' * 40 + 'b') is None"), {"timed_out", "crashed"}),
    # A loop entirely in C (max over a callable iterator) never lets the CPU timer's handler
    # run: only the parent's wall-clock kill (or the RLIMIT_CPU backstop) ends it.
    ("c_level_hang", body("return max(iter(int, 1)) > 0"), {"timed_out", "crashed"}),
    ("memory_bomb", body("return len('x' * 10**10) > 0"), {"raised"}),
    ("growing_list", body("x = []\nwhile True:\n    x.append('a' * 10**6)"), {"raised", "timed_out"}),
    ("recursion_bomb", body("return check(response + 'x')"), {"raised"}),
    ("deep_json", body("return json.loads('[' * 100000 + ']' * 100000) is not None"), {"raised"}),
    ("raises", body("raise ValueError('boom')"), {"raised"}),
    ("returns_one", body("return 1"), {"non_bool"}),
    ("returns_yes", body("return 'yes'"), {"non_bool"}),
    ("returns_none", body("return None"), {"non_bool"}),
    ("returns_list", body("return [True]"), {"non_bool"}),
]


@pytest.fixture(scope="module")
def sandbox():
    with StyleSandbox(cpu_seconds=CPU_SECONDS, wall_seconds=WALL_SECONDS, memory_mb=256) as box:
        yield box


@pytest.mark.parametrize(("source", "counters"), [pytest.param(s, c, id=i) for i, s, c in HOSTILE])
def test_hostile_check_scores_false_without_side_effects(sandbox: StyleSandbox, tmp_path: Path,
                                                         source: str, counters: set[str]) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    target = tmp_path / "pwned"
    source = source.replace("SECRET", str(secret)).replace("TARGET", str(target))
    before = sandbox.counters.as_dict()

    result = sandbox.run([WORDS_AT_MOST_5, source], ["one two three", "one two three four five six"])

    assert result == [[True, False], [False, False]]
    after = sandbox.counters.as_dict()
    assert any(after[name] > before[name] for name in counters), (before, after)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt"]
    assert secret.read_text() == "secret"
    assert sandbox.run([WORDS_AT_MOST_5], ["a b c"]) == [[True]]


def test_hostile_corpus_is_large_enough() -> None:
    assert len(HOSTILE) >= 20


@pytest.mark.parametrize("source", [s for i, s, c in HOSTILE if c == {"rejected"}])
def test_rejected_sources_are_refused_statically(source: str) -> None:
    assert static_rejection_reason(source) is not None


@pytest.mark.parametrize("attribute", ["gi_frame", "gi_code", "f_back", "f_globals", "co_code",
                                       "tb_frame", "cr_frame", "ag_frame", "func_globals",
                                       "_private", "__class__", "format", "format_map", "mro"])
def test_dangerous_attribute_names_are_refused(attribute: str) -> None:
    assert static_rejection_reason(body(f"return response.{attribute} is None")) is not None


@pytest.mark.parametrize("code", [
    "while True:\n    try:\n        pass\n    finally:\n        continue",
    "while True:\n    try:\n        pass\n    finally:\n        break\nreturn True",
    "try:\n    pass\nfinally:\n    return True",
    "for w in response.split():\n    try:\n        pass\n    finally:\n        if w:\n"
    "            for c in w:\n                continue",
    "try:\n    pass\nexcept ValueError:\n    pass\nfinally:\n    try:\n        pass\n"
    "    finally:\n        return False",
], ids=["continue", "break", "return", "nested_continue", "nested_try_return"])
def test_jumps_out_of_finally_are_refused_with_a_reason(code: str) -> None:
    """They discard the CPU-timeout exception in flight, so the check would run until killed."""
    reason = static_rejection_reason(body(code))
    assert reason is not None and "finally" in reason, reason


def test_finally_without_jumps_is_allowed() -> None:
    code = ("n = 0\nfor w in response.split():\n    try:\n        n += int(w)\n"
            "    except ValueError:\n        continue\n    finally:\n        n += 0\n"
            "    def helper():\n        return 1\nreturn n > 1")
    assert static_rejection_reason(body(code)) is None
    nested_def = "try:\n    pass\nfinally:\n    def f():\n        return 1\nreturn f() == 1"
    assert static_rejection_reason(body(nested_def)) is None


def test_ordinary_code_passes_static_validation_and_runs(sandbox: StyleSandbox) -> None:
    source = (
        '"""Checks the answer is a short markdown list."""\n'
        "MAX_WORDS: int = 120\n"
        "PATTERN = re.compile(r'^\\s*[-*] ', re.MULTILINE)\n\n"
        "def count_words(text):\n"
        "    return len([w for w in text.split() if w.strip(string.punctuation)])\n\n"
        "def check(response: str) -> bool:\n"
        "    try:\n"
        "        bullets = len(PATTERN.findall(response))\n"
        "    except (ValueError, TypeError):\n"
        "        return False\n"
        "    words = sorted(response.split(), key=lambda w: (len(w), w))\n"
        "    return bullets >= 2 and count_words(response) <= MAX_WORDS and len(words) > 0\n"
    )
    assert static_rejection_reason(source) is None
    assert sandbox.run([source], ["- a\n- b", "- a only"]) == [[True, False]]


BENIGN = [
    WORDS_AT_MOST_5,
    body("return re.search(r'^#{1,3} ', response, re.MULTILINE) is not None"),
    body("try:\n    json.loads(response)\nexcept ValueError:\n    return False\nreturn True"),
    body("lines = [line for line in response.splitlines() if line.strip()]\n"
         "return sum(1 for line in lines if re.match(r'\\s*[-*] ', line)) >= 2"),
]
RESPONSES = [
    "# Title\n- one\n- two\n",
    '{"a": 1, "b": [1, 2]}',
    "word " * 12,
    "",
    "* a\n* b\n## Sub",
]
# Hand-worked: rows are checks (<=5 words, heading, valid JSON, >=2 bullets), columns responses.
# Word counts by str.split: 6 ("#", "Title", "-", "one", "-", "two"), 5, 12, 0, 6.
EXPECTED = [
    [False, True, False, True, False],
    [True, False, False, False, True],
    [False, True, False, False, False],
    [True, False, False, False, True],
]


def test_benign_checks_batched_as_matrix(sandbox: StyleSandbox) -> None:
    assert sandbox.run(BENIGN, RESPONSES) == EXPECTED


def test_benign_helpers_from_provided_modules(sandbox: StyleSandbox) -> None:
    sources = [
        body("return math.isclose(len(response) / 4, 1.0)"),
        body("return response[-1:] in string.punctuation and response != ''"),
        body("return json.dumps({'n': len(response)}) == '{\"n\": 4}'"),
        "LIMIT = 3\n\ndef words(text):\n    return text.split()\n\n" + body("return len(words(response)) <= LIMIT"),
    ]
    assert sandbox.run(sources, ["abc.", "abcdef"]) == [[True, False], [True, False], [True, False], [True, True]]


def test_run_groups_scores_each_group_only_on_its_own_responses(sandbox: StyleSandbox) -> None:
    groups = [
        ([WORDS_AT_MOST_5], ["a", "a b c d e f"]),
        ([BENIGN[1], BENIGN[3], WORDS_AT_MOST_5], ["# h"]),
        ([], ["x"]),
    ]
    assert sandbox.run_groups(groups) == [
        [[True, False]],
        [[True], [False], [True]],
        [],
    ]


def test_empty_inputs(sandbox: StyleSandbox) -> None:
    assert sandbox.run([], ["a"]) == []
    assert sandbox.run([WORDS_AT_MOST_5], []) == [[]]


def test_non_string_sources_are_rejected(sandbox: StyleSandbox) -> None:
    before = sandbox.counters.rejected
    assert sandbox.run([None, ["def check(r): return True"]], ["a"]) == [[False], [False]]  # type: ignore[list-item]
    assert sandbox.counters.rejected == before + 2


def test_only_exact_true_counts(sandbox: StyleSandbox) -> None:
    sources = [body("return True"), body("return False"), body("return 1 == 1"), body("return 1")]
    assert sandbox.run(sources, ["r"]) == [[True], [False], [True], [False]]


def _worker_pid(box: StyleSandbox) -> int:
    """The worker's process group (the process the sandbox started, its PID namespace's init and
    the worker proper): signals go to the whole group."""
    box.run([WORDS_AT_MOST_5], ["warm"])
    worker = box._box[0]
    assert worker is not None
    return worker.proc.pid


def test_hang_kills_worker_and_the_rest_runs_on_a_fresh_one() -> None:
    """A worker that stops answering is killed; only that cell scores False, the hung check is
    not retried in the batch, and every other cell (same response included) still runs."""
    with StyleSandbox(cpu_seconds=CPU_SECONDS, wall_seconds=0.3) as box:
        pid = _worker_pid(box)
        os.killpg(pid, signal.SIGSTOP)
        other = WORDS_AT_MOST_5 + "\n"
        result = box.run([WORDS_AT_MOST_5, other], ["a", "b"])
        assert result == [[False, False], [True, True]]
        counts = box.counters
        assert (counts.timed_out, counts.skipped, counts.worker_restarts) == (1, 1, 1)
        assert box.run([WORDS_AT_MOST_5], ["a"]) == [[True]]


@pytest.mark.parametrize(("disable_after", "timed_out", "skipped"), [(1, 1, 2), (0, 3, 0)])
def test_check_that_timed_out_is_not_rerun_in_the_batch(disable_after: int, timed_out: int,
                                                        skipped: int) -> None:
    loop = body("while True:\n    pass")
    with StyleSandbox(cpu_seconds=0.05, disable_after_timeouts=disable_after) as box:
        result = box.run([loop, WORDS_AT_MOST_5], ["a", "b", "c"])
        assert result == [[False, False, False], [True, True, True]]
        assert (box.counters.timed_out, box.counters.skipped) == (timed_out, skipped)
        assert box.counters.worker_restarts == 0


def test_worker_crash_mid_batch_is_counted_and_recovered() -> None:
    """Same rule as a hang: the crashed cell scores False and its check is not run again."""
    with StyleSandbox(cpu_seconds=CPU_SECONDS, wall_seconds=5.0) as box:
        pid = _worker_pid(box)
        os.killpg(pid, signal.SIGSTOP)
        killer = threading.Timer(0.2, os.killpg, args=(pid, signal.SIGKILL))
        killer.start()
        try:
            result = box.run([WORDS_AT_MOST_5, WORDS_AT_MOST_5 + "\n"], ["a", "b"])
        finally:
            killer.join()
        assert result == [[False, False], [True, True]]
        assert (box.counters.crashed, box.counters.skipped, box.counters.worker_restarts) == (1, 1, 1)


def test_worker_dead_between_calls_is_restarted() -> None:
    with StyleSandbox(cpu_seconds=CPU_SECONDS) as box:
        pid = _worker_pid(box)
        os.killpg(pid, signal.SIGKILL)
        box._box[0].proc.wait(timeout=10)
        assert box.run([WORDS_AT_MOST_5], ["a"]) == [[True]]
        assert box.counters.worker_restarts == 1


def test_close_stops_worker_and_next_call_restarts() -> None:
    box = StyleSandbox(cpu_seconds=CPU_SECONDS)
    with box:
        pid = _worker_pid(box)
    assert box._box[0] is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert box.run([WORDS_AT_MOST_5], ["a"]) == [[True]]
    box.close()


def test_sandbox_pickles_as_settings() -> None:
    with StyleSandbox(cpu_seconds=0.3, memory_mb=128, wall_seconds=2.0) as box:
        copy = pickle.loads(pickle.dumps(box))
        assert (copy.cpu_seconds, copy.memory_bytes, copy.wall_seconds) == (0.3, 128 * 1024 * 1024, 2.0)
        assert copy.run([WORDS_AT_MOST_5], ["a"]) == [[True]]
        copy.close()


def test_model_written_regex_with_invalid_escape_is_accepted(sandbox: StyleSandbox) -> None:
    source = body("return re.search('\\d+', response) is not None")
    assert sandbox.run([source], ["abc 12", "abc"]) == [[True, False]]


def test_counters_are_plain_ints() -> None:
    counts = SandboxCounters(rejected=2)
    assert counts.as_dict() == {"rejected": 2, "raised": 0, "timed_out": 0, "non_bool": 0,
                                "crashed": 0, "skipped": 0, "worker_restarts": 0, "recycled": 0}
    json.dumps(counts.as_dict())


def test_run_style_checks_default_instance() -> None:
    assert run_style_checks([WORDS_AT_MOST_5, "import os"], ["a b", "a b c d e f"]) == [
        [True, False], [False, False]]
    assert sandbox_module.default_sandbox() is sandbox_module.default_sandbox()


def test_worker_layer_positive_control_reaches_os() -> None:
    assert worker_status(escaped("assert g['getpid']() > 0"))[0] == "1"


def test_worker_layer_has_no_open_builtin(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    assert worker_status(body(f"open({str(target)!r}, 'w')\nreturn True"))[0] == "e"
    assert not target.exists()


@pytest.mark.parametrize("action", [
    "g['open'](TARGET, g['O_WRONLY'] | g['O_CREAT'])",
    "assert g['system']('touch ' + TARGET) == 0",
    "pid = g['fork']()\n        g['_exit'](0) if pid == 0 else None",
    "g['__builtins__']['__import__']('socket')",
    "g['__builtins__']['__import__']('subprocess').run(['touch', TARGET])",
], ids=["os_open", "os_system", "os_fork", "import_socket", "subprocess"])
def test_worker_layer_blocks_escapes_even_with_os(tmp_path: Path, action: str) -> None:
    """Layer 2 alone: with the static check bypassed and ``os`` recovered, nothing gets out."""
    target = tmp_path / "pwned"
    status, _ = worker_status(escaped(action.replace("TARGET", repr(str(target)))))
    assert status == "0"
    assert not target.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot + drop to nobody only happen for root")
@pytest.mark.parametrize("action", [
    "g['unlink'](VICTIM)",
    "g['stat'](VICTIM)",
    f"g['kill']({os.getpid()}, 0)",
    "assert len(g['listdir']('/')) > 0",
], ids=["unlink", "stat", "signal_trainer", "list_root"])
def test_worker_layer_as_root_is_jailed_and_unprivileged(tmp_path: Path, action: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    victim.chmod(0o666)
    status, hardening = worker_status(escaped(action.replace("VICTIM", repr(str(victim)))))
    assert {"chroot", "nobody"} <= hardening
    assert status == "0"
    assert victim.read_text() == "keep"
