"""Local-file benchmarks: GSM8K / MATH / IFEval loaders (JSONL and Parquet) and their scorers."""

import json

import pytest

from core.io import DataError
from evals import external
from evals.external import (
    gsm8k_rows,
    ifeval_check,
    ifeval_rows,
    math_rows,
    score_ifeval,
    score_math,
)
from evals.metrics import Ratio, aggregate


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def write_parquet(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


MATH = [
    {"problem": "What is $1/2$ as a fraction?", "solution": "It is $\\boxed{\\frac{1}{2}}$.",
     "level": "Level 1", "type": "Prealgebra"},
    {"problem": "Compute $2^{10}$.", "solution": "$2^{10} = \\boxed{1024}$", "level": "Level 5",
     "type": "Number Theory"},
]

NO_COMMA_KEYWORDS = {"prompt": "Write about a cat and a dog without commas.",
                     "instruction_id_list": ["punctuation:no_comma", "keywords:existence"],
                     "kwargs": [{}, {"keywords": ["cat", "dog"]}]}
QUOTED = {"prompt": "Quote it.", "instruction_id_list": ["startend:quotation"], "kwargs": [{}]}


# --- GSM8K ---------------------------------------------------------------------------------

def test_gsm8k_rows_from_jsonl(tmp_path):
    f = write_jsonl(tmp_path / "g.jsonl", [{"question": "1+1?", "answer": "1+1=2\n#### 2"},
                                           {"question": "Big?", "answer": "#### 1,000"}])
    rows = gsm8k_rows(f, "test")
    assert [r["answer"] for r in rows] == ["2", "1000"]
    assert rows[0]["prompt"].startswith("Problem: 1+1?")


# --- MATH ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_math_rows_take_the_boxed_answer_and_groups(tmp_path, fmt):
    f = (write_jsonl if fmt == "jsonl" else write_parquet)(tmp_path / f"m.{fmt}", MATH)
    rows = math_rows(f, "test")
    assert [r["answer"] for r in rows] == ["\\frac{1}{2}", "1024"]
    assert [(r["level"], r["type"]) for r in rows] == [("level_1", "prealgebra"),
                                                       ("level_5", "number_theory")]
    assert rows[1]["prompt"] == "Problem: Compute $2^{10}$.\nSolution:"


def test_math_500_style_level_and_subject(tmp_path):
    f = write_jsonl(tmp_path / "m.jsonl", [{"problem": "p", "solution": "\\boxed{3}", "level": 2,
                                            "subject": "Intermediate Algebra"}])
    row = math_rows(f, "test")[0]
    assert (row["level"], row["type"]) == ("level_2", "intermediate_algebra")


@pytest.mark.parametrize("bad,match", [
    ({"problem": "p", "solution": "no box"}, r"m\.jsonl:2: `solution` has no \\boxed"),
    ({"problem": "p"}, r"m\.jsonl:2: needs string fields `problem` and `solution`"),
    ('{"problem": "p", ', r"m\.jsonl:2: not valid JSON"),
])
def test_math_malformed_row_names_file_and_line(tmp_path, bad, match):
    f = write_jsonl(tmp_path / "m.jsonl", [MATH[0], bad])
    with pytest.raises(DataError, match=match):
        math_rows(f, "test")


def test_math_malformed_parquet_row_names_the_row(tmp_path):
    f = write_parquet(tmp_path / "m.parquet", [MATH[0], {**MATH[1], "solution": "none"}])
    with pytest.raises(DataError, match=r"m\.parquet: row 1: `solution` has no"):
        math_rows(f, "test")


def test_score_math_uses_math_verify_and_reports_groups():
    row = {"answer": "\\frac{1}{2}", "level": "level_1", "type": "prealgebra"}
    m = score_math(row, ["so \\boxed{0.5}", "\\boxed{\\dfrac{1}{2}}", "\\boxed{\\frac{1}{3}}", "no"],
                   "\\boxed{1/2}")
    assert m["pass@1"] == 0.5 and m["pass@k"] == 1.0 and m["greedy_accuracy"] == 1.0
    assert m["boxed_rate"] == 0.75
    assert m["pass@1_level_1"] == Ratio(2.0, 4) and m["pass@1_prealgebra"] == Ratio(2.0, 4)


def test_math_group_metrics_pool_only_rows_of_that_group():
    rows = [{"answer": "1", "level": "level_1", "type": None},
            {"answer": "2", "level": "level_5", "type": None},
            {"answer": "3", "level": "level_5", "type": None}]
    outs = ["\\boxed{1}", "\\boxed{2}", "\\boxed{0}"]
    agg = aggregate(score_math(r, [o, o], o) for r, o in zip(rows, outs))
    assert agg["pass@1"] == pytest.approx(2 / 3)
    assert agg["pass@1_level_1"] == 1.0 and agg["pass@1_level_5"] == 0.5


# --- IFEval --------------------------------------------------------------------------------

def test_ifeval_rows_jsonl(tmp_path):
    f = write_jsonl(tmp_path / "i.jsonl", [{"key": 7, **NO_COMMA_KEYWORDS}, QUOTED])
    rows = ifeval_rows(f, "test")
    assert rows[0]["key"] == 7 and rows[0]["prompt"] == NO_COMMA_KEYWORDS["prompt"]
    assert rows[1]["instruction_id_list"] == ["startend:quotation"]


def test_ifeval_parquet_nulls_in_kwargs_are_dropped(tmp_path):
    # Parquet stores kwargs as one struct holding every instruction's fields, null where unused.
    f = write_parquet(tmp_path / "i.parquet", [NO_COMMA_KEYWORDS, QUOTED])
    rows = ifeval_rows(f, "test")
    assert rows[0]["kwargs"] == [{}, {"keywords": ["cat", "dog"]}]
    assert rows[1]["kwargs"] == [{}]


@pytest.mark.parametrize("bad,match", [
    ({**QUOTED, "instruction_id_list": ["startend:quote"]}, r"i\.jsonl:2: unknown instruction 'startend:quote'"),
    ({**NO_COMMA_KEYWORDS, "kwargs": [{}, {}]},
     r"i\.jsonl:2: instruction 'keywords:existence' takes kwargs \['keywords'\], got \[\]"),
    ({**NO_COMMA_KEYWORDS, "kwargs": [{}, {"keyword": ["cat"]}]}, r"i\.jsonl:2: .*got \['keyword'\]"),
    ({**NO_COMMA_KEYWORDS, "kwargs": [{}]}, r"i\.jsonl:2: `kwargs` must be a list of 2 objects"),
    ({**QUOTED, "instruction_id_list": []}, r"i\.jsonl:2: `instruction_id_list` must be a non-empty"),
    ({"instruction_id_list": ["startend:quotation"], "kwargs": [{}]},
     r"i\.jsonl:2: needs a non-empty string field `prompt`"),
    ("not json", r"i\.jsonl:2: not valid JSON"),
])
def test_ifeval_malformed_row_names_file_and_line(tmp_path, bad, match):
    f = write_jsonl(tmp_path / "i.jsonl", [QUOTED, bad])
    with pytest.raises(DataError, match=match):
        ifeval_rows(f, "test")


def test_ifeval_missing_punkt_data_fails_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(external, "_has_punkt", lambda: False)
    row = {"prompt": "Answer in fewer than 3 sentences.",
           "instruction_id_list": ["length_constraints:number_sentences"],
           "kwargs": [{"num_sentences": 3, "relation": "less than"}]}
    f = write_jsonl(tmp_path / "i.jsonl", [QUOTED, row])
    with pytest.raises(LookupError, match=r"i\.jsonl:2: .*punkt_tab.*nltk\.downloader punkt_tab"):
        ifeval_rows(f, "test")


def _row(spec):
    return {"id": "t", **spec}


@pytest.mark.parametrize("response,strict,loose", [
    ("My cat and my dog play all day.", [True, True], [True, True]),
    ("My cat, my dog.", [False, True], [False, True]),
    ("My bird sings.", [True, False], [True, False]),
    ("", [False, False], [False, False]),
])
def test_ifeval_check_hand_written(response, strict, loose):
    assert ifeval_check(_row(NO_COMMA_KEYWORDS), response) == (strict, loose)


def test_ifeval_loose_forgives_a_preamble_line():
    assert ifeval_check(_row(QUOTED), 'Sure, here it is:\n"A quoted answer."') == ([False], [True])
    assert ifeval_check(_row(QUOTED), '"A quoted answer."') == ([True], [True])


def test_score_ifeval_prompt_and_instruction_level():
    m = score_ifeval(_row(NO_COMMA_KEYWORDS), ["My cat and my dog play.", "My cat, my dog."],
                     "My cat and my dog play.")
    assert m["prompt_level_strict_acc"] == 0.5
    assert m["inst_level_strict_acc"] == Ratio(3, 4)
    assert m["greedy_prompt_level_strict_acc"] == 1.0
    assert m["greedy_inst_level_strict_acc"] == Ratio(2, 2)
    assert {"prompt_level_loose_acc", "inst_level_loose_acc", "greedy_prompt_level_loose_acc",
            "greedy_inst_level_loose_acc"} <= set(m)


def test_ifeval_instruction_level_pools_over_instructions():
    # Row 1: 2 instructions, both followed; row 2: 1 instruction, not followed.
    per_row = [score_ifeval(_row(NO_COMMA_KEYWORDS), ["My cat and my dog."], ""),
               score_ifeval(_row(QUOTED), ["not quoted"], "")]
    agg = aggregate(per_row, keep_greedy=False)
    assert agg["prompt_level_strict_acc"] == 0.5
    assert agg["inst_level_strict_acc"] == pytest.approx(2 / 3)  # pooled: 2 of 3 instructions
