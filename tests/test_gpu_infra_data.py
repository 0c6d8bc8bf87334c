"""A real model and real data on a machine (issue 66, defect 9): MATH as a training source, and
Qwen2.5-Math's preset with the DRO answer marker its completions need.

Before: `data.external.format` accepted `gsm8k` alone, so MATH could be scored but not trained on;
and the only real-model presets were Qwen3's, whose DRO marker `</think>` Qwen2.5-Math never
writes (every rollout would be all reasoning and no answer).
"""

from __future__ import annotations

import copy
import json

import pytest

from core.params import ParamsError, load, read_raw, validate

MATH_ROWS = [
    {"problem": "What is $\\frac{1}{2} + \\frac{1}{3}$?",
     "solution": "The common denominator is 6, so the sum is $\\frac{3}{6} + \\frac{2}{6} = "
                 "\\boxed{\\frac{5}{6}}$.", "level": "Level 2", "type": "Prealgebra"},
    {"problem": "Solve $x + 2 = 5$.", "solution": "Subtract 2: $x = \\boxed{3}$.", "level": 1,
     "subject": "Algebra", "answer": "3"},
    {"problem": "Compute $2^{10}$.", "solution": "$2^{10} = \\boxed{1024}$.", "level": "Level 1"},
]
PRESET = "qwen2p5_math_1p5b_1gpu"
# How Qwen2.5-Math ends a solution (its own chain-of-thought prompt asks for the box).
QWEN25_MATH_COMPLETION = ("We have $x + 2 = 5$, so $x = 5 - 2 = 3$.\n"
                          "Therefore, the final answer is $\\boxed{3}$.")


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _math_params(tmp_path, preset: str | None = "ci"):
    raw = copy.deepcopy(read_raw())
    raw["data"] = {"source": "external", "external": {
        "format": "math", "train": _write(tmp_path / "math_train.jsonl", MATH_ROWS * 4),
        "test": _write(tmp_path / "math_test.jsonl", MATH_ROWS), "val_frac": 0.25}}
    return validate(raw, preset=preset)


def test_math_is_a_training_source(tmp_path):
    from flows.prepare import prepare
    from rewards.verifiable import rlvr_score

    params = _math_params(tmp_path)
    assert params.data.external.format == "math"
    counts = prepare(params, tmp_path / "prepared")
    assert (counts["arith_train"], counts["arith_val"], counts["arith_test"]) == (9, 3, 3)
    rows = [json.loads(line) for line in (tmp_path / "prepared/arith_test.jsonl").open()]
    assert [r["answer"] for r in rows] == ["\\frac{5}{6}", "3", "1024"]
    for r in rows:  # the arith family's schema: a policy prompt, the gold answer, a reference
        assert r["family"] == "arith" and r["prompt"].startswith("Problem: ") and r["id"].startswith("math-")
        # One box, at the end, after the marker the tiny world's references use; RLVR scores it 1.
        assert r["reference"].endswith(f" The answer is \\boxed{{{r['answer']}}}.")
        assert r["reference"].count("\\boxed{") == 1
        assert rlvr_score(r["reference"], r["answer"]) == 1.0
    assert [r["difficulty"] for r in rows] == [2, 1, 1]


def test_a_math_row_without_an_answer_is_named(tmp_path):
    from core.io import DataError
    from world.external import math_rows

    f = _write(tmp_path / "bad.jsonl", [MATH_ROWS[0], {"problem": "p", "solution": "no box"}])
    with pytest.raises(DataError, match=r"bad\.jsonl:2: `solution` has no \\boxed"):
        math_rows(f, "train")


def test_an_unknown_external_format_still_fails_naming_the_key():
    raw = copy.deepcopy(read_raw())
    raw["data"]["external"]["format"] = "aime"
    with pytest.raises(ParamsError, match=r"data\.external\.format"):
        validate(raw)


def test_the_qwen25_math_preset_splits_its_answers_at_its_box():
    from rewards.dro import cot_and_answer, query_rubrics, reference_answer

    p = load(preset=PRESET)
    assert p.base_model.path == "/models/Qwen2.5-Math-1.5B" and p.base_model.device == "cuda"
    assert p.data.external.format == "math"
    marker = p.reward.dro.answer_marker
    assert marker == "\\boxed" and p.method_grpo("dro").enable_thinking is False
    cot, answer = cot_and_answer(QWEN25_MATH_COMPLETION, "arith", marker)
    assert answer == "\\boxed{3}$." and cot.endswith("the final answer is $")
    # Qwen3's marker, or the tiny world's, finds no answer in the same completion.
    for other in ("</think>", "The answer is"):
        assert cot_and_answer(QWEN25_MATH_COMPLETION, "arith", other)[1] == ""
    # A reference (GSM8K's or MATH's, as world/external.py writes them) splits there too, and its
    # rubrics survive: the box is the answer.
    row = {"reference": " x + 2 = 5, so x = 5 - 2 = 3. The answer is \\boxed{3}."}
    assert reference_answer(row, "arith", marker) == " \\boxed{3}."
    assert [r.name for r in query_rubrics(row, "arith", marker)] == [
        "boxed_integer", "boxed_once", "ends_after_box", "cot_matches_box"]


def test_the_qwen25_math_preset_keeps_the_1gpu_recipe_otherwise():
    p, q = load(preset=PRESET), load(preset="qwen3_1p7b_1gpu")
    assert p.grpo == q.grpo and p.eval == q.eval
    for method in ("rlvr", "rlme", "rlvrr", "rlcer", "rationale"):
        assert p.method_grpo(method) == q.method_grpo(method), method
