"""`evaluate_policy` aggregation with a fake `generate` (no model), and benchmark specs."""

import json
from types import SimpleNamespace

import pytest

import evals.suite as suite
from core.io import DataError
from evals.suite import BENCHMARKS, evaluate_policy, headline_key, parse_spec

EV = SimpleNamespace(n_test=10, k=3, temperature=1.0, max_new_tokens=8, batch_size=4)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def prepared(tmp_path):
    d = tmp_path / "prepared"
    d.mkdir()
    write_jsonl(d / "arith_test.jsonl", [{"prompt": "P1", "answer": "4", "hint": None},
                                         {"prompt": "P2", "answer": "7", "hint": None}])
    write_jsonl(d / "arith_cf_test.jsonl", [{"prompt": "P1", "answer": "4", "hint": "5"}])
    write_jsonl(d / "facts_test.jsonl", [{"prompt": "F1", "style": "bullets",
                                          "gold_facts": ["bear", "white"]}])
    return d


@pytest.fixture
def fake_generate(monkeypatch):
    """Scripted completions per prompt (sampled and greedy); records every call."""
    script = {
        "P1": (["\\boxed{4}", "\\boxed{4}", "\\boxed{5}"], "\\boxed{4}"),
        "P2": (["\\boxed{1}", "no answer", "\\boxed{2}"], "\\boxed{7}"),
        "F1": (["- a bear.\n- white.", "- a bear.", "- a bear.\n- white."], "- a bear."),
        "Problem: 1+1?\nSolution:": (["\\boxed{2}", "\\boxed{3}", "\\boxed{2}"], "\\boxed{2}"),
    }
    calls = []

    def fake(model, tokenizer, prompts, *, num_samples=1, greedy=False, **kw):
        calls.append((list(prompts), num_samples, greedy))
        return [[script[p][1]] if greedy else script[p][0][:num_samples] for p in prompts]

    monkeypatch.setattr(suite, "generate", fake)
    return calls


def test_tiny_world_keys_and_values(prepared, fake_generate):
    m = evaluate_policy(None, None, prepared, ["arith", "arith_cf", "facts"], EV, seed=0)
    assert m["arith/pass@1"] == pytest.approx((2 / 3 + 0) / 2)
    assert m["arith/pass@k"] == 0.5
    assert m["arith/greedy_accuracy"] == 1.0
    assert m["arith/boxed_rate"] == pytest.approx((1 + 2 / 3) / 2)
    assert m["arith/n"] == 2
    assert m["arith/mean_length"] == pytest.approx(sum(map(len, ["\\boxed{4}", "\\boxed{4}", "\\boxed{5}",
                                                                 "\\boxed{1}", "no answer", "\\boxed{2}"])) / 6)
    assert m["arith_cf/cheat_rate"] == pytest.approx(1 / 3)
    assert m["arith_cf/pass@1"] == pytest.approx(2 / 3)
    assert {"facts/coverage", "facts/style_adherence", "facts/greedy_coverage"} <= set(m)
    # the keys the flows and the report read are all there
    for key in ["arith/pass@1", "arith/greedy_accuracy", "arith/pass@k", "arith/mean_length",
                "arith_cf/cheat_rate", "facts/coverage", "facts/style_adherence"]:
        assert key in m
    for name in ["arith", "arith_cf", "facts"]:
        assert 0.0 <= m[f"{name}/self_bleu"] <= 1.0
    # P1 has two identical samples of three: self-BLEU between the all-same and all-different cases
    assert 0.0 < m["arith_cf/self_bleu"] < 1.0


def test_no_greedy_and_k1_drop_greedy_keys_and_self_bleu(prepared, fake_generate):
    m = evaluate_policy(None, None, prepared, ["arith"], EV, seed=0, k=1, greedy=False)
    assert not any(k.startswith("arith/greedy") for k in m)
    assert "arith/self_bleu" not in m
    assert m["arith/pass@1"] == 0.5
    assert all(not greedy for _, _, greedy in fake_generate)


def test_items_hold_each_rows_scores_and_change_nothing_else(prepared, fake_generate, tmp_path):
    plain = evaluate_policy(None, None, prepared, ["arith", "arith_cf", "facts"], EV, seed=0)
    items: dict = {}
    m = evaluate_policy(None, None, prepared, ["arith", "arith_cf", "facts"], EV, seed=0, items=items)
    assert m == plain
    assert list(items) == ["arith", "arith_cf", "facts"]
    arith = items["arith"]
    assert arith["headline"] == "pass@1" and arith["ids"] == ["row-00000", "row-00001"]  # no `id` field
    assert arith["metrics"]["pass@1"] == [round(2 / 3, 6), 0.0]  # each row: mean over its k samples
    assert arith["metrics"]["greedy_accuracy"] == [1.0, 1.0]
    for name, entry in items.items():  # each list averages to the pooled metric
        for metric, values in entry["metrics"].items():
            assert len(values) == len(entry["ids"])
            assert sum(values) / len(values) == pytest.approx(m[f"{name}/{metric}"], abs=1e-6)
    write_jsonl(prepared / "arith_test.jsonl", [{"id": "arith-test-00007", "prompt": "P1", "answer": "4"}])
    items = {}
    evaluate_policy(None, None, prepared, ["arith"], EV, seed=0, greedy=False, items=items)
    assert items["arith"]["ids"] == ["arith-test-00007"]
    assert not any(k.startswith("greedy") for k in items["arith"]["metrics"])


def test_n_caps_rows(prepared, fake_generate):
    m = evaluate_policy(None, None, prepared, ["arith"], EV, seed=0, n=1)
    assert m["arith/n"] == 1 and m["arith/pass@1"] == pytest.approx(2 / 3)


def test_external_gsm8k_spec(prepared, fake_generate, tmp_path):
    f = write_jsonl(tmp_path / "gsm8k_test.jsonl", [{"question": "1+1?", "answer": "so 2\n#### 2"}])
    m = evaluate_policy(None, None, prepared, ["arith", f"gsm8k:{f}"], EV, seed=0)
    assert m["gsm8k/pass@1"] == pytest.approx(2 / 3)
    assert m["gsm8k/greedy_accuracy"] == 1.0 and m["gsm8k/n"] == 1
    assert "arith/pass@1" in m


def test_all_rows_are_checked_before_any_generation(prepared, fake_generate, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "no final number"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:1: `answer` has no final number"):
        evaluate_policy(None, None, prepared, ["arith", f"gsm8k:{bad}"], EV, seed=0)
    assert fake_generate == []


def test_empty_file_is_an_error(prepared, fake_generate, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataError, match=r"empty\.jsonl: no rows for benchmark 'math'"):
        evaluate_policy(None, None, prepared, [f"math:{empty}"], EV, seed=0)


@pytest.mark.parametrize("spec,match", [
    ("nope", (r"unknown benchmark 'nope'; known: \['arith', 'arith_cf', 'arith_ref', 'facts', "
              r"'gsm8k', 'helpsteer3', 'ifeval', 'math', 'pairs'\]")),
    ("gsm8k", r"benchmark 'gsm8k' reads a local file: name it as 'gsm8k:<path"),
    ("math: ", r"benchmark 'math' reads a local file"),
    ("arith:x.jsonl", r"benchmark 'arith' reads data/prepared and takes no path"),
])
def test_bad_specs(spec, match):
    with pytest.raises(KeyError, match=match):
        parse_spec(spec)


def test_missing_external_file_names_it(prepared, fake_generate, tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.jsonl"):
        evaluate_policy(None, None, prepared, [f"ifeval:{tmp_path / 'nothere.jsonl'}"], EV, seed=0)


def test_same_benchmark_twice_is_an_error(prepared, fake_generate):
    with pytest.raises(KeyError, match="listed twice"):
        evaluate_policy(None, None, prepared, ["arith", "arith"], EV, seed=0)


def test_registry_shape_and_headlines():
    # flows/train.py reads BENCHMARKS[task][2] as the headline metric
    assert BENCHMARKS["arith"][2] == "pass@1" and BENCHMARKS["arith_cf"][2] == "cheat_rate"
    stem, score, headline = BENCHMARKS["facts"]
    assert (stem, headline) == ("facts", "coverage")
    assert headline_key("arith") == "arith/pass@1"
    assert headline_key("ifeval:/data/x.jsonl") == "ifeval/prompt_level_strict_acc"
    assert parse_spec("math:/tmp/a b.parquet")[2].name == "a b.parquet"


def test_registry_imports_no_torch():
    # params.yaml validation may call evals.registry.parse_spec; loading params must stay light.
    import subprocess
    import sys

    code = "import sys, evals.registry; print('torch' in sys.modules, 'if_verifiable' in sys.modules)"
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.split() == ["False", "False"]


def test_pairs_and_helpsteer3_benchmarks(tmp_path, monkeypatch):
    """GenRM benchmarks (paper 001): outcome accuracy headline, RC of the top-5 reasons, malformed rate."""
    checklist = ["The first step is wrong: 3 * 3 is 9, not 11.",
                 "The final answer 2 is wrong; the correct answer is 3."]
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    write_jsonl(prepared / "pairs_test.jsonl", [{"prompt": "G1", "label": "B", "checklist": checklist}])
    hs3 = write_jsonl(tmp_path / "hs3.jsonl", [{"context": "3 * 3 / 3?", "response1": "11, so 2",
                                                "response2": "9, so 3", "checklist": checklist,
                                                "overall_preference": 3}])
    both = f"\n1. {checklist[0]}\n2. {checklist[1]}\n\\boxed{{B>>A}}"
    one_wrong_verdict = f"\n1. {checklist[1]}\n\\boxed{{A>B}}"

    def fake(model, tokenizer, prompts, *, num_samples=1, greedy=False, **kw):
        return [[both] if greedy else [both, one_wrong_verdict, "B wins"][:num_samples] for _ in prompts]

    monkeypatch.setattr(suite, "generate", fake)
    m = evaluate_policy(None, None, prepared, ["pairs", f"helpsteer3:{hs3}"], EV, seed=0)
    for name in ("pairs", "helpsteer3"):
        assert m[f"{name}/outcome_acc"] == pytest.approx(1 / 3)
        assert m[f"{name}/rc"] == pytest.approx((1 + 0.5 + 0) / 3)
        assert m[f"{name}/malformed_rate"] == pytest.approx(1 / 3)
        assert m[f"{name}/greedy_outcome_acc"] == 1.0 and m[f"{name}/greedy_rc"] == 1.0
    assert headline_key("pairs") == "pairs/outcome_acc"
    assert headline_key(f"helpsteer3:{hs3}") == "helpsteer3/outcome_acc"
