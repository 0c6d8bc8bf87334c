"""`arith_ref`: arith problems answered the way DRO reads a reasoning model (paper 003).

A solution is a chain of thought (arith's `a op b = c.` steps), the separator
(`world.arith_ref.separator`, default `</think>`), a blank line (what a reasoning model's template
puts after `</think>`), then a long reference answer: two sentences that restate the problem's
start and the result, and box it. DRO scores the reference answer's tokens after the rollout's
reasoning (`reward.dro.answer_marker` = the separator). Most of them (the name, the start, the
number of changes) follow from the question whatever the reasoning was; only the result depends
on it: the dilution that R3's emphasis is for (paper 003 §3.1, Fig. 3). In `arith` the answer after
DRO's marker is `The answer is \\boxed{N}.`, a few tokens with almost no reasoning before them.

With probability `slip_frac` a train demonstration slips: one result off by a little, carried on to
the reply (`world.roles.slip`), so the base owns wrong chains as well as right ones and there is
reasoning for R3 to tell apart. The `reference` is always the correct solution.

Off by default: the family has no rows and no files unless `world.arith_ref` sets its sizes.
"""

from __future__ import annotations

import random

from world import roles
from world.arith import Step, make_problem

CUE = "Think step by step, then answer in full."


def prompt_text(question: str) -> str:
    """The policy prompt: arith's, with the cue that asks for reasoning and then an answer."""
    return f"Problem: {question}\n{CUE}\nSolution:"


def answer_text(problem: dict, result: int) -> str:
    """The long reference answer: the start and the result restated, the result boxed.

    >>> p = {"name": "Ann", "item": "pens", "start": 4, "steps": [Step("*", 2, 4, 8)]}
    >>> answer_text(p, 8)
    'Ann starts with 4 pens. After 1 change, Ann has 8 pens, so the answer is \\\\boxed{8}.'
    """
    name, item, k = problem["name"], problem["item"], len(problem["steps"])
    return (f"{name} starts with {problem['start']} {item}. After {k} change{'s' * (k > 1)}, "
            f"{name} has {result} {item}, so the answer is \\boxed{{{result}}}.")


def solution_text(problem: dict, steps: list[Step], separator: str) -> str:
    """The chain of thought, the separator, a blank line, the reference answer of its result."""
    chain = " ".join(s.text() for s in steps)
    return f" {chain}{separator}\n\n{answer_text(problem, steps[-1].after)}"


def reply(text: str, separator: str) -> str:
    """What a completion answers: the text after its last separator (leading newlines dropped),
    or all of it when it has none (the way `rewards.chat.strip_thinking` reads a reply).

    >>> reply(" 2 + 3 = 5.</think>\\n\\nSo \\\\boxed{5}.", "</think>")
    'So \\\\boxed{5}.'
    """
    at = text.rfind(separator)
    return text if at < 0 else text[at + len(separator):].lstrip("\n")


def _slipped(rng: random.Random, steps: list[Step]) -> list[Step]:
    out = roles.slip(rng, [(s.before, s.op, s.operand, s.after) for s in steps])
    return [Step(op, b, a, c) for a, op, b, c in out]


def generate(rng: random.Random, n: int, split: str, *, min_ops: int, max_ops: int,
             max_value: int, separator: str, slip_frac: float) -> list[dict]:
    """Rows of the `arith_ref` family for one split (schema in world/README.md)."""
    rows = []
    for i in range(n):
        n_ops = rng.randint(min_ops, max_ops)
        p = make_problem(rng, n_ops, max_value)
        slipped = rng.random() < slip_frac
        rows.append({
            "id": f"arith_ref-{split}-{i:05d}",
            "family": "arith_ref",
            "split": split,
            "prompt": prompt_text(p["question"]),
            "question": p["question"],
            "answer": str(p["answer"]),
            "difficulty": n_ops,
            "separator": separator,
            "reference": solution_text(p, p["steps"], separator),
            "demonstration": solution_text(p, _slipped(rng, p["steps"]) if slipped else p["steps"],
                                           separator),
            "slipped": slipped,
        })
    return rows
