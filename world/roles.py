"""Role families of the tiny world: the evaluator (RLME) and the rubricator (RLCER) (SPEC 11).

The base model learns these roles in SFT so that every label-free method runs with the same model:
- `evaluator`: an arithmetic solution, a meta-question, a YES/NO answer. The prompt is exactly
  RLME's default template in params.yaml (`reward.rlme.template`; a test keeps them equal), so a
  live evaluator is asked in the format it was trained on.
- `rubricator`: a problem and one solution, then a JSON list of rubrics from the vocabulary the
  tiny world's rule verifier understands (`rewards.evolving_rubrics.RUBRIC_VOCABULARY`). Criteria
  and points are drawn at random: SFT teaches the format, RLCER has to teach which rubrics are
  valid.

Solutions shown to both roles are drawn from the mistakes a small model makes on `arith`: correct,
a wrong number in the box (the "sloppy" demonstrations), an arithmetic slip carried through the
later steps, a solution cut off before its box. Answers follow from the solution's text and the gold
answer only, so the labels are exact.
"""

from __future__ import annotations

import json
import random
import re

EVALUATOR_TEMPLATE = "{problem}{solution}\nLength: {length} characters.\n{anchor}Question: {question}\nAnswer:"
ANCHOR_TEMPLATE = "The correct answer is {gold}.\n"
RUBRICATOR_TEMPLATE = "{problem}{solution}\nRubrics:"

Q_CORRECT = "Is the answer correct?"
Q_PROCESS = "Is every step of the reasoning shown and correct?"
Q_SHORT = "Is the solution shorter than 70 characters?"
SHORT_LIMIT = 70

# criterion -> sign of its points (+ merit, - flaw)
RUBRICS = {
    "shows every intermediate step": 1,
    "states the final answer in a box": 1,
    "each step's arithmetic is correct": 1,
    "contains an arithmetic slip": -1,
    "the boxed answer matches the last step": 1,
    "ends with the boxed answer": 1,
    "repeats the question": -1,
}

_STEP = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+)\.")
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "/": lambda a, b: a // b}


def _steps(reference: str) -> list[tuple[int, str, int, int]]:
    return [(int(a), op, int(b), int(c)) for a, op, b, c in _STEP.findall(reference)]


def _text(steps: list[tuple[int, str, int, int]], boxed: int | None) -> str:
    body = " ".join(f"{a} {op} {b} = {c}." for a, op, b, c in steps)
    return " " + body + ("" if boxed is None else f" The answer is \\boxed{{{boxed}}}.")


def solution_variant(rng: random.Random, row: dict) -> tuple[str, str, bool]:
    """(kind, solution text, reasoning ok) for an `arith` row: correct | sloppy | slip | cut."""
    steps = _steps(row["reference"])
    gold = int(row["answer"])
    kind = rng.choices(["correct", "sloppy", "slip", "cut"], weights=[45, 25, 20, 10])[0]
    if kind == "correct":
        return kind, _text(steps, gold), True
    if kind == "sloppy":
        wrong = {steps[-1][0], steps[0][0], gold + rng.choice([-2, -1, 1, 2])} - {gold}
        wrong = sorted(w for w in wrong if w >= 0) or [gold + 1]
        return kind, _text(steps, rng.choice(wrong)), False
    if kind == "cut":
        return kind, _text(steps[: rng.randint(1, len(steps))], None), False
    # slip: one step's result is off; later steps carry the wrong value correctly.
    i = rng.randrange(len(steps))
    out, value = [], None
    for j, (a, op, b, c) in enumerate(steps):
        if value is not None:
            a = value
            c = _OPS[op](a, b) if op != "/" or a % b == 0 else a // b
        if j == i:
            c = max(0, c + rng.choice([-3, -2, -1, 1, 2, 3]))
            c = c if c != steps[j][3] else c + 1
        out.append((a, op, b, c))
        value = c
    return kind, _text(out, value), False


def evaluator_row(rng: random.Random, row: dict) -> dict:
    """One evaluator example built from an `arith` row (prompt/demonstration like every family)."""
    kind, solution, process_ok = solution_variant(rng, row)
    question = rng.choices([Q_CORRECT, Q_PROCESS, Q_SHORT], weights=[60, 25, 15])[0]
    boxed = re.findall(r"\\boxed\{(\d+)\}", solution)
    correct = bool(boxed) and int(boxed[-1]) == int(row["answer"])
    yes = {Q_CORRECT: correct, Q_PROCESS: process_ok and correct,
           Q_SHORT: len(solution) < SHORT_LIMIT}[question]
    anchor = ANCHOR_TEMPLATE.format(gold=row["answer"]) if rng.random() < 0.15 else ""
    prompt = EVALUATOR_TEMPLATE.format(problem=row["prompt"], solution=solution,
                                       length=len(solution), anchor=anchor, question=question)
    return {"id": row["id"].replace("arith", "evaluator", 1), "family": "evaluator",
            "split": row["split"], "prompt": prompt, "question": question, "kind": kind,
            "label": "YES" if yes else "NO", "demonstration": "YES" if yes else "NO"}


def rubricator_row(rng: random.Random, row: dict) -> dict:
    """One rubricator example: the problem, one solution, 2-3 random rubrics as JSON."""
    kind, solution, _ = solution_variant(rng, row)
    criteria = rng.sample(sorted(RUBRICS), k=rng.randint(2, 3))
    rubrics = [{"criterion": c, "points": RUBRICS[c] * rng.randint(1, 5)} for c in criteria]
    if rng.random() < 0.2:
        rubrics.append({"criterion": f"uses at most {rng.randint(1, 4)} steps",
                        "points": rng.randint(1, 3)})
    return {"id": row["id"].replace("arith", "rubricator", 1), "family": "rubricator",
            "split": row["split"], "kind": kind,
            "prompt": RUBRICATOR_TEMPLATE.format(problem=row["prompt"], solution=solution),
            "demonstration": " " + json.dumps(rubrics)}


def generate(rng: random.Random, arith_rows: list[dict], make) -> list[dict]:
    """One role example per `arith` row, in order."""
    return [make(rng, r) for r in arith_rows]
