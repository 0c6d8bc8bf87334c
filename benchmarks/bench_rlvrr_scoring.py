"""Per-completion cost of the RLVRR reward (docs/methods/rlvrr.md, docs/methods/shared.md).

Question: is the reference reward chain cheap enough that its overhead stays in the ~1% range
paper 002 reports (section 4, 0.71%)? The content part is pure Python (regex + LCS); the style
part crosses a process boundary, so it is batched as in training: every completion of a step
against its prompt's checks in ONE sandbox round trip.

Synthetic setup (seeded): 3 references per prompt with 5 key points x 3 keywords each (one of
them a two-word phrase), completions of about 250-400 words that use the keywords in shuffled
order with repeats, and 4 weighted style checks (word count, markdown structure, line length,
final punctuation). A round scores ``--completions`` completions: one ``StyleSandbox.run`` call
(4 checks x completions), then ``content_reward`` + ``style_reward(results=...)`` +
``chain_reward`` for each completion. Reported per completion, median over rounds:

- content: ``content_reward`` alone;
- sandbox: the batched sandbox call divided by the number of completions;
- total w/o sandbox: content + style arithmetic + chain (the round minus the sandbox call);
- total: the whole round divided by the number of completions.

The worker start-up (once per process) is measured separately and excluded from the rounds.

Run from the repository root: ``python -m benchmarks.bench_rlvrr_scoring [--rounds 60]``.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time

from rewards.reference_chain import chain_reward, content_reward, style_reward
from rewards.sandbox import StyleSandbox

STYLE_CHECKS = [
    ("def check(response):\n"
     "    n = len(response.split())\n"
     "    return 150 <= n <= 600\n", 0.4),
    ("def check(response):\n"
     "    has_heading = re.search(r'^#{1,3} ', response, re.MULTILINE) is not None\n"
     "    bullets = [l for l in response.splitlines() if re.match(r'\\s*[-*] ', l)]\n"
     "    return has_heading and len(bullets) >= 2\n", 0.3),
    ("def check(response):\n"
     "    return all(len(line) <= 400 for line in response.splitlines())\n", 0.2),
    ("def check(response):\n"
     "    text = response.rstrip()\n"
     "    return text != '' and text[-1] in '.!?'\n", 0.1),
]

FILLER = ("the of and to in is that it for as with was on be by this are from or an at which "
          "have has not but can more also these such their other into only most its some").split()


def make_keypoints(rng: random.Random) -> list[list[str]]:
    """5 key points x 3 keywords; the second keyword of each is a two-word phrase."""
    return [[f"concept{m}{rng.randint(0, 999)}", f"phrase{m} part{m}", f"entity{m}x"] for m in range(5)]


def make_text(rng: random.Random, keypoints: list[list[str]], words: int, shuffle: bool) -> str:
    """Markdown-ish text with every keyword placed among filler words."""
    tokens = [rng.choice(FILLER) for _ in range(words)]
    keywords = [kw for point in keypoints for kw in point]
    if shuffle:
        keywords = keywords + rng.sample(keywords, k=5)
        rng.shuffle(keywords)
    slots = sorted(rng.sample(range(words), k=len(keywords)))
    for slot, keyword in zip(slots, keywords):
        tokens[slot] = keyword
    lines = ["# Answer"]
    for start in range(0, words, 40):
        prefix = "- " if rng.random() < 0.5 else ""
        lines.append(prefix + " ".join(tokens[start:start + 40]) + ".")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--completions", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    keypoints = make_keypoints(rng)
    references = [make_text(rng, keypoints, rng.randint(250, 400), shuffle=False) for _ in range(3)]
    sources = [source for source, _ in STYLE_CHECKS]

    with StyleSandbox() as sandbox:
        start = time.perf_counter()
        sandbox.run(sources, [references[0]])
        startup = time.perf_counter() - start

        content_times: list[float] = []
        sandbox_times: list[float] = []
        total_times: list[float] = []
        rewards: list[float] = []
        for _ in range(args.rounds):
            completions = [make_text(rng, keypoints, rng.randint(250, 400), shuffle=True)
                           for _ in range(args.completions)]
            round_start = time.perf_counter()
            matrix = sandbox.run(sources, completions)
            sandbox_done = time.perf_counter()
            content_total = 0.0
            for r, completion in enumerate(completions):
                content_start = time.perf_counter()
                content = content_reward(completion, references, keypoints)
                content_total += time.perf_counter() - content_start
                style = style_reward(completion, STYLE_CHECKS, results=[row[r] for row in matrix])
                rewards.append(chain_reward(content, style))
            round_end = time.perf_counter()
            content_times.append(content_total / args.completions)
            sandbox_times.append((sandbox_done - round_start) / args.completions)
            total_times.append((round_end - round_start) / args.completions)
        counters = sandbox.counters.as_dict()

    def row(label: str, values: list[float]) -> str:
        us = [v * 1e6 for v in values]
        return (f"| {label:<18} | {statistics.median(us):>9.1f} | {min(us):>8.1f} | "
                f"{sorted(us)[int(0.9 * (len(us) - 1))]:>8.1f} |")

    print(f"RLVRR scoring, {args.rounds} rounds x {args.completions} completions, "
          f"5 key points x 3 keywords, 3 references, {len(STYLE_CHECKS)} style checks")
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"sandbox worker start-up {startup * 1e3:.0f} ms (once, excluded)")
    print("| per completion     | median us |   min us |   p90 us |")
    print("|--------------------|-----------|----------|----------|")
    print(row("content only", content_times))
    print(row("sandbox only", sandbox_times))
    print(row("total w/o sandbox", [t - s for t, s in zip(total_times, sandbox_times)]))
    print(row("total", total_times))
    print(f"mean reward {statistics.fmean(rewards):.3f}; sandbox counters {counters}")


if __name__ == "__main__":
    main()
