"""`pairs`: two solutions to one `arith` problem, one with injected errors (paper 001).

The human atomic checklist has one item per injected error, worded from the injection, so a
generative reward model's reasons can be matched against it (rationale consistency). The label is
the better response; the demonstration for the GenRM role lists the reasons by importance then a
boxed verdict (`A>B` for one error, `A>>B` for two or more; mirrored when B is better).
"""

from __future__ import annotations

import random

from world.arith import Step, make_problem, solution_text

ORDINALS = ["first", "second", "third", "fourth"]


def _inject(rng: random.Random, steps: list[Step], answer: int) -> tuple[list[Step], int, list[str]]:
    """Corrupt a copy of the solution: an arithmetic slip in a step and/or a wrong final box."""
    steps = list(steps)
    kinds = rng.sample(["slip", "box"], rng.randint(1, 2))
    reasons = []
    boxed = answer
    if "slip" in kinds:
        k = rng.randrange(len(steps))
        s = steps[k]
        wrong = s.after + rng.choice([-2, -1, 1, 2])
        wrong = wrong if wrong >= 0 else s.after + 1
        steps[k] = Step(s.op, s.operand, s.before, wrong)
        reasons.append(f"The {ORDINALS[k]} step is wrong: {s.before} {s.op} {s.operand} is "
                       f"{s.after}, not {wrong}.")
        # Later steps carry the slip forward, as a careless solver's would.
        value = wrong
        for j in range(k + 1, len(steps)):
            t = steps[j]
            after = {"+": value + t.operand, "-": value - t.operand, "*": value * t.operand,
                     "/": value // t.operand}[t.op]
            steps[j] = Step(t.op, t.operand, value, after)
            value = after
        boxed = value
    if "box" in kinds or boxed == answer:
        final = boxed + rng.choice([-3, -1, 1, 3])
        final = final if final >= 0 else boxed + 1
        if final == answer:
            final += 1
        reasons.append(f"The final answer {final} is wrong; the correct answer is {answer}.")
        boxed = final
    return steps, boxed, reasons


def genrm_prompt(question: str, a: str, b: str) -> str:
    return (f"Problem: {question}\nResponse A:{a}\nResponse B:{b}\n"
            "Judge: list the reasons by importance, then the verdict.\nReasons:")


def generate(rng: random.Random, n: int, split: str, *, min_ops: int, max_ops: int,
             max_value: int) -> list[dict]:
    """Rows of the `pairs` family for one split (schema in world/README.md)."""
    rows = []
    for i in range(n):
        p = make_problem(rng, rng.randint(min_ops, max_ops), max_value)
        good = " " + solution_text(p["steps"], p["answer"])
        bad_steps, bad_box, checklist = _inject(rng, p["steps"], p["answer"])
        bad = " " + solution_text(bad_steps, bad_box)
        a_better = rng.random() < 0.5
        a, b = (good, bad) if a_better else (bad, good)
        strength = ">>" if len(checklist) > 1 else ">"
        verdict = f"A{strength}B" if a_better else f"B{strength}A"
        side = "B" if a_better else "A"
        listed = "".join(f"\n{j + 1}. Response {side}: {r}" for j, r in enumerate(checklist))
        rows.append({
            "id": f"pairs-{split}-{i:05d}",
            "family": "pairs",
            "split": split,
            "prompt": genrm_prompt(p["question"], a, b),
            "question": p["question"],
            "response_a": a,
            "response_b": b,
            "label": "A" if a_better else "B",
            "verdict": verdict,
            "checklist": checklist,
            "demonstration": f"{listed}\nVerdict: \\boxed{{{verdict}}}",
        })
    return rows
