"""End-to-end cost of the `rlvrr_chain` TRL reward callable per completion (paper 002 §5.4).

Extends ``bench_rlvrr_scoring`` (the pure scoring functions) to what training actually calls:
:class:`rewards.rlvrr.RlvrrReward` on a generation batch of ``--prompts`` x ``--generations``
completions (params.yaml's GRPO default is 4 x 8 = 32), including the component look-up by
``prompt_id``, special-token stripping, ONE batched sandbox round trip for every style check of
the batch, content scoring and the chain. Two scenarios:

- ``long``: the synthetic setup of ``bench_rlvrr_scoring`` (5 key points x 3 keywords, 3
  references, 4 style checks, completions of 250-400 words with shuffled keywords and repeats),
  a different prompt's components per group;
- ``facts``: the tiny world: components made by the `rule` synthesis backend from
  ``data/prepared/facts_train.jsonl`` (skipped if absent), completions = the rows' SFT
  demonstrations with an EOS token appended (short answers, 4-5 style checks).

Reported per completion, median over rounds: the whole call; the sandbox round trip inside it;
the call with ``content_only=True`` (no sandbox). The worker start-up is excluded.

Run from the repository root: ``python -m benchmarks.bench_rlvrr_callable [--rounds 40]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_rlvrr_scoring import STYLE_CHECKS, make_keypoints, make_text
from rewards.rlvrr import RlvrrReward
from rewards.sandbox import StyleSandbox

FACTS = Path("data/prepared/facts_train.jsonl")


class TimedSandbox(StyleSandbox):
    """Records the wall time of each round trip."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def run_groups(self, groups, cpu_seconds=None):
        start = time.perf_counter()
        try:
            return super().run_groups(groups, cpu_seconds)
        finally:
            self.times.append(time.perf_counter() - start)


def long_scenario(rng: random.Random, n_prompts: int, generations: int, rounds: int):
    """Components of ``n_prompts`` synthetic prompts and ``rounds`` batches of completions."""
    rows, keypoints = [], {}
    for p in range(n_prompts):
        points = make_keypoints(rng)
        keypoints[f"p{p}"] = points
        rows.append({"id": f"p{p}", "key_points": [f"point {m}" for m in range(len(points))],
                     "keywords": points,
                     "style_checks": [{"name": f"c{i}", "source": s, "weight": w}
                                      for i, (s, w) in enumerate(STYLE_CHECKS)],
                     "references": [make_text(rng, points, rng.randint(250, 400), shuffle=False)
                                    for _ in range(3)]})
    batches = []
    for _ in range(rounds):
        ids = [f"p{p}" for p in range(n_prompts) for _ in range(generations)]
        batches.append((ids, [make_text(rng, keypoints[i], rng.randint(250, 400), shuffle=True)
                              for i in ids]))
    return rows, batches


def facts_scenario(rng: random.Random, n_prompts: int, generations: int, rounds: int):
    """Rule-backend components of the tiny world's facts prompts; demonstrations as completions."""
    from core.io import read_jsonl
    from core.params import SynthesizeConfig
    from synthesis import synthesize

    source = read_jsonl(FACTS)[: max(n_prompts * rounds, 64)]
    components, _ = synthesize(source, SynthesizeConfig())
    rows = [c.as_row() for c in components]
    by_id = {r["id"]: r for r in source}
    kept = [r["id"] for r in rows]
    batches = []
    for _ in range(rounds):
        chosen = rng.sample(kept, n_prompts)
        ids = [i for i in chosen for _ in range(generations)]
        texts = [rng.choice([by_id[i]["demonstration"]] + by_id[i]["references"]) + "<|endoftext|>"
                 for i in ids]
        batches.append((ids, texts))
    return rows, batches


def measure(rows: list[dict], batches, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "components.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        sandbox = TimedSandbox()
        full = RlvrrReward(path, sandbox=sandbox)
        content_only = RlvrrReward(path, sandbox=sandbox, content_only=True)
        ids, texts = batches[0]
        start = time.perf_counter()
        full(prompts=[""] * len(texts), completions=texts, prompt_id=ids)  # worker start-up
        startup = time.perf_counter() - start
        sandbox.times.clear()
        totals, contents, rewards = [], [], []
        for ids, texts in batches:
            n = len(texts)
            start = time.perf_counter()
            values = full(prompts=[""] * n, completions=texts, prompt_id=ids)
            totals.append((time.perf_counter() - start) / n)
            start = time.perf_counter()
            content_only(prompts=[""] * n, completions=texts, prompt_id=ids)
            contents.append((time.perf_counter() - start) / n)
            rewards.extend(v for v in values if v is not None)
        sandbox_per = [t / len(b[1]) for t, b in zip(sandbox.times, batches)]
        counters = sandbox.counters.as_dict()
        full.close()

    def row(name: str, values: list[float]) -> str:
        us = sorted(v * 1e6 for v in values)
        return (f"| {name:<22} | {statistics.median(us):>9.1f} | {us[0]:>8.1f} | "
                f"{us[int(0.9 * (len(us) - 1))]:>8.1f} |")

    print(f"\n### {label}: {len(batches)} calls x {len(batches[0][1])} completions "
          f"(first-call start-up {startup * 1e3:.0f} ms, excluded)")
    print("| per completion         | median us |   min us |   p90 us |")
    print("|------------------------|-----------|----------|----------|")
    print(row("rlvrr_chain call", totals))
    print(row("  of which sandbox", sandbox_per))
    print(row("content_only call", contents))
    print(f"mean reward {statistics.fmean(rewards):.3f}; sandbox counters {counters}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--scenario", choices=("long", "facts", "both"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}")
    rng = random.Random(args.seed)
    if args.scenario in ("long", "both"):
        measure(*long_scenario(rng, args.prompts, args.generations, args.rounds),
                "long: 250-400 words, 5x3 keywords, 3 refs, 4 checks")
    if args.scenario in ("facts", "both"):
        if FACTS.exists():
            measure(*facts_scenario(rng, args.prompts, args.generations, args.rounds),
                    "facts: tiny world, rule-backend components")
        else:
            print(f"\n(facts scenario skipped: {FACTS} not found; run `python -m flows.prepare`)")


if __name__ == "__main__":
    main()
