"""Role families of the tiny world: the evaluator (RLME) and the rubricator (RLCER).

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
later steps, a solution cut off before its box. `world.evaluator.kinds` can add chains whose every
step is right but which do not solve the problem (a broken chain, a wrong operand or start, a
skipped step) and `world.evaluator.per_problem` several examples per problem; the defaults keep the
v1 rows. Answers follow from the solution's text and the gold answer only, so the labels are exact.
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
# Paper 000 §4.8's reasoning-process question (RLME-NoCheat), which REPLACES the outcome question:
# the evaluator rows ask it in place of Q_PROCESS with `world.evaluator.process_question` (preset
# hint_copier), with the same labels.
Q_REASONING = ("Does the whole solution logically lead from the question to an answer, even if it "
               "does not match the correct answer?")
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


# Kinds of solution and their default sampling weights (the rubricator's and, unless
# `world.evaluator.kinds` says otherwise, the evaluator's: these rows are unchanged since v1).
V1_KINDS = {"correct": 45, "sloppy": 25, "slip": 20, "cut": 10}
# Every kind `solution_variant` can make. Beyond v1: the ways a small model's chain goes wrong
# while every step's arithmetic is right (a broken chain, a wrong operand or start, a skipped
# step), which is what an RL policy drifts into when a weak evaluator rewards it (live RLME on
# the v1 base learned chains such as "0 * 2 = 0." boxing 0; docs/results.md).
KINDS = ("correct", "sloppy", "slip", "cut", "chain_break", "wrong_operand", "wrong_start",
         "missing_step")


def _carry(steps: list[tuple[int, str, int, int]], i: int, *, a: int | None = None,
           b: int | None = None, c_delta: int = 0) -> list[tuple[int, str, int, int]]:
    """`steps` with step i changed (first operand `a`, operand `b`, or its result off by
    `c_delta`); every later step starts from the changed value and computes correctly."""
    out, value = [], None
    for j, (a0, op, b0, c) in enumerate(steps):
        if j == i and (a is not None or b is not None):
            a0, b0 = (a0 if a is None else a), (b0 if b is None else b)
            value = a0
        if value is not None:
            a0 = value
            c = _OPS[op](a0, b0) if op != "/" or a0 % b0 == 0 else a0 // b0
        if j == i and c_delta:
            c = max(0, c + c_delta)
            c = c if c != steps[j][3] else c + 1
        out.append((a0, op, b0, c))
        value = c
    return out


def slip(rng: random.Random,
         steps: list[tuple[int, str, int, int]]) -> list[tuple[int, str, int, int]]:
    """`steps` with one result off by a little and every later step carried on from it."""
    i = rng.randrange(len(steps))
    return _carry(steps, i, c_delta=rng.choice([-3, -2, -1, 1, 2, 3]))


def _other(rng: random.Random, value: int, low: int = 0) -> int:
    """A number near `value` but different from it, at least `low`."""
    v = value + rng.choice([-3, -2, -1, 1, 2, 3, 5, 10])
    return v if v >= low and v != value else value + 1


def solution_variant(rng: random.Random, row: dict,
                     kinds: dict[str, float] = V1_KINDS) -> tuple[str, str, bool]:
    """(kind, solution text, reasoning ok) for an `arith` row, the kind drawn by `kinds` weights.

    correct | sloppy (a wrong number in the box) | slip (one result off, carried on) | cut (no
    box) | chain_break (a step ignores the previous result) | wrong_operand | wrong_start |
    missing_step. Only `correct` has sound reasoning; whether the boxed answer is right is read
    from the text by the caller.
    """
    steps = _steps(row["reference"])
    gold = int(row["answer"])
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    if kind == "correct":
        return kind, _text(steps, gold), True
    if kind == "sloppy":
        wrong = {steps[-1][0], steps[0][0], gold + rng.choice([-2, -1, 1, 2])} - {gold}
        wrong = sorted(w for w in wrong if w >= 0) or [gold + 1]
        return kind, _text(steps, rng.choice(wrong)), False
    if kind == "cut":
        return kind, _text(steps[: rng.randint(1, len(steps))], None), False
    if kind == "slip":
        out = slip(rng, steps)
    elif kind == "wrong_start":
        out = _carry(steps, 0, a=_other(rng, steps[0][0], low=1))
    elif kind == "wrong_operand":
        i = rng.randrange(len(steps))
        op, b = steps[i][1], steps[i][2]
        new_b = rng.choice([d for d in (2, 3, 4) if d != b]) if op in "*/" else _other(rng, b, low=1)
        out = _carry(steps, i, b=new_b)
    elif kind == "chain_break" and len(steps) > 1:
        i = rng.randrange(1, len(steps))
        out = _carry(steps, i, a=_other(rng, steps[i][0]))
    elif kind == "missing_step" and len(steps) > 1:
        i = rng.randrange(1, len(steps))
        out = _carry(steps[:i] + steps[i + 1:], i, a=steps[i][0]) if i < len(steps) - 1 \
            else steps[:i]
    else:
        out = []
    # No chain to break or step to skip, or a changed operand made a result negative: a slip
    # instead (a slip keeps its rare negative results: the rubricator rows have them since v1).
    if not out or (kind != "slip" and min(c for *_, c in out) < 0):
        kind, out = "slip", _carry(steps, 0, c_delta=rng.choice([-2, -1, 1, 2]))
    return kind, _text(out, out[-1][3]), False


def evaluator_row(rng: random.Random, row: dict, kinds: dict[str, float] = V1_KINDS,
                  process_question: str = Q_PROCESS) -> dict:
    """One evaluator example built from an `arith` row (prompt/demonstration like every family).

    `process_question` words the reasoning-process question (`Q_PROCESS`, or paper 000's
    `Q_REASONING`): YES iff the chain is sound, which in this world is only the `correct` kind
    (so also right; a box that does not follow from the chain, or a cut chain, is NO).
    """
    kind, solution, process_ok = solution_variant(rng, row, kinds)
    question = rng.choices([Q_CORRECT, process_question, Q_SHORT], weights=[60, 25, 15])[0]
    boxed = re.findall(r"\\boxed\{(\d+)\}", solution)
    correct = bool(boxed) and int(boxed[-1]) == int(row["answer"])
    yes = {Q_CORRECT: correct, process_question: process_ok and correct,
           Q_SHORT: len(solution) < SHORT_LIMIT}[question]
    anchor = ANCHOR_TEMPLATE.format(gold=row["answer"]) if rng.random() < 0.15 else ""
    prompt = EVALUATOR_TEMPLATE.format(problem=row["prompt"], solution=solution,
                                       length=len(solution), anchor=anchor, question=question)
    return {"id": row["id"].replace("arith", "evaluator", 1), "family": "evaluator",
            "split": row["split"], "prompt": prompt, "question": question, "kind": kind,
            "label": "YES" if yes else "NO", "demonstration": "YES" if yes else "NO"}


# The judge's other wrong chains (beside the minimal pair), by weight.
JUDGE_OTHER_KINDS = {"slip": 1.0, "chain_break": 0.3, "wrong_start": 0.3, "wrong_operand": 0.3,
                     "cut": 0.2}


def judge_rows(rng: random.Random, row: dict) -> list[dict]:
    """The judge's examples for one `arith` problem, all asking "Is the answer correct?".

    A minimal pair, the correct solution (YES) and the same steps with a wrong number boxed (NO),
    so the only thing that tells them apart is the box against the last step; and half the time
    one more wrong chain (NO). The world writes them as the `judge` SFT family: in the base's role
    phase (45% of the mix, 2400 steps at 1e-3) they teach the base to catch a wrong box in its own
    solutions, which the evaluator rows alone did not (self-evaluation AUROC 0.85 against 0.55,
    docs/results.md); `flows.build_judge` trains a separate judge on them alone.
    """
    steps = _steps(row["reference"])
    solutions = [_text(steps, int(row["answer"])), solution_variant(rng, row, {"sloppy": 1})[1]]
    if rng.random() < 0.5:
        solutions.append(solution_variant(rng, row, JUDGE_OTHER_KINDS)[1])
    out = []
    for n, solution in enumerate(solutions):
        yes = solution.endswith(f"\\boxed{{{row['answer']}}}.")
        prompt = EVALUATOR_TEMPLATE.format(problem=row["prompt"], solution=solution,
                                           length=len(solution), anchor="", question=Q_CORRECT)
        out.append({"id": row["id"].replace("arith", "judge", 1) + f"-{n}", "family": "judge",
                    "split": row["split"], "prompt": prompt, "question": Q_CORRECT,
                    "label": "YES" if yes else "NO", "demonstration": "YES" if yes else "NO"})
    return out


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


def generate(rng: random.Random, arith_rows: list[dict], make, per_row: int = 1) -> list[dict]:
    """`per_row` role examples per `arith` row, in order; ids stay unique (`-1`, `-2`, ... after
    the first)."""
    out = []
    for r in arith_rows:
        for n in range(per_row):
            row = make(rng, r)
            out.append(row if n == 0 else {**row, "id": f"{row['id']}-{n}"})
    return out
