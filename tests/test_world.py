import json
import re

import pytest

from core.io import DataError, read_jsonl, write_jsonl
from core.params import load
from rewards.verifiable import extract_boxed, rlvr_score
from world import generate_world
from world.arith import make_problem
from world.external import gsm8k_rows
from world.facts import coverage, style_ok


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("w")
    generate_world(load(preset="ci").world, d)
    return d


def test_deterministic(world, tmp_path):
    generate_world(load(preset="ci").world, tmp_path)
    for f in world.glob("*.jsonl"):
        assert f.read_bytes() == (tmp_path / f.name).read_bytes(), f.name


def test_other_seed_differs(world, tmp_path):
    cfg = load(preset="ci").world
    generate_world(cfg.model_copy(update={"seed": cfg.seed + 1}), tmp_path)
    assert (world / "arith_train.jsonl").read_bytes() != (tmp_path / "arith_train.jsonl").read_bytes()


def test_splits_and_counts(world):
    cfg = load(preset="ci").world
    assert len(read_jsonl(world / "arith_train.jsonl")) == cfg.arith.n_train
    assert len(read_jsonl(world / "arith_test.jsonl")) == cfg.arith.n_test
    ids = [r["id"] for f in world.glob("*.jsonl") for r in read_jsonl(f)]
    assert len(ids) == len(set(ids))


def test_arith_schema_and_truth(world):
    for r in read_jsonl(world / "arith_train.jsonl"):
        assert set(r) >= {"id", "prompt", "answer", "difficulty", "reference", "demonstration"}
        assert 1 <= r["difficulty"] <= 4
        assert rlvr_score(r["reference"], r["answer"]) == 1.0
        # Every step of the reference is true arithmetic.
        for a, op, b, c in re.findall(r"(\d+) ([-+*/]) (\d+) = (\d+)\.", r["reference"]):
            a, b, c = int(a), int(b), int(c)
            assert {"+": a + b, "-": a - b, "*": a * b, "/": a // b}[op] == c
            if op == "/":
                assert a % b == 0
        # Sloppy demonstrations box a wrong number, others the right one.
        assert (rlvr_score(r["demonstration"], r["answer"]) == 0.0) == r["sloppy"]


def test_test_split_is_clean(world):
    assert all(not r["sloppy"] for r in read_jsonl(world / "arith_test.jsonl"))


def test_counterfactual_hints(world):
    train = read_jsonl(world / "arith_cf_train.jsonl")
    test = read_jsonl(world / "arith_cf_test.jsonl")
    assert all(r["hint"] == r["answer"] and "Hint:" in r["prompt"] for r in train)
    assert all(r["hint"] != r["answer"] and f"the answer is {r['hint']}" in r["prompt"] for r in test)


def test_difficulty_levels_all_present():
    import random
    rng = random.Random(0)
    for n in range(1, 5):
        p = make_problem(rng, n)
        assert len(p["steps"]) == n and p["question"].count("Then") == n


def test_facts_references_and_metrics(world):
    for r in read_jsonl(world / "facts_train.jsonl"):
        assert len(r["references"]) == 3 and len(set(r["references"])) == 3
        for ref in r["references"]:
            assert coverage(ref, r["gold_facts"]) == 1.0
            assert style_ok(ref, r["style"])


def test_coverage_is_in_order():
    assert coverage("red fox in the forest", ["fox", "red", "forest"]) == pytest.approx(2 / 3)
    assert coverage("", ["a"]) == 0.0


def test_pairs_checklist(world):
    for r in read_jsonl(world / "pairs_train.jsonl"):
        good = r["response_a"] if r["label"] == "A" else r["response_b"]
        bad = r["response_b"] if r["label"] == "A" else r["response_a"]
        gold = extract_boxed(good)
        assert extract_boxed(bad) != gold
        assert 1 <= len(r["checklist"]) <= 2
        assert r["verdict"].startswith(r["label"])
        assert r["demonstration"].endswith(f"\\boxed{{{r['verdict']}}}")


def test_gsm8k_loader(tmp_path):
    f = tmp_path / "g.jsonl"
    write_jsonl(f, [{"question": "Tom has 3 and buys 4. How many?",
                     "answer": "3 + 4 = <<3+4=7>>7\n#### 1,007"}])
    rows = gsm8k_rows(f, "train")
    assert rows[0]["answer"] == "1007" and rows[0]["prompt"].startswith("Problem: Tom")


def test_gsm8k_malformed_rows_name_file_and_line(tmp_path):
    f = tmp_path / "g.jsonl"
    f.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n{not json\n")
    with pytest.raises(DataError, match=r"g\.jsonl:2"):
        gsm8k_rows(f, "train")
    f.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n\n"
                 + json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(DataError, match=r"g\.jsonl:3: `answer` has no final number"):
        gsm8k_rows(f, "train")
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        gsm8k_rows(tmp_path / "missing.jsonl", "train")


def test_prepare_with_external_gsm8k_replaces_arith(tmp_path):
    from flows.prepare import prepare

    for split, n in (("train", 40), ("test", 5)):
        write_jsonl(tmp_path / f"g_{split}.jsonl",
                    [{"question": f"Q{i}?", "answer": f"work\n#### {i}"} for i in range(n)])
    p = load(preset="ci")
    ext = p.data.external.model_copy(update={"train": str(tmp_path / "g_train.jsonl"),
                                             "test": str(tmp_path / "g_test.jsonl"),
                                             "val_frac": 0.25})
    p = p.model_copy(update={"data": p.data.model_copy(update={"source": "external", "external": ext})})
    counts = prepare(p, tmp_path / "prepared")
    assert (counts["arith_train"], counts["arith_val"], counts["arith_test"]) == (30, 10, 5)
    rows = read_jsonl(tmp_path / "prepared" / "arith_test.jsonl")
    assert rows[3]["answer"] == "3" and rows[3]["prompt"] == "Problem: Q3?\nSolution:"
    train_ids = {r["id"] for r in read_jsonl(tmp_path / "prepared" / "arith_train.jsonl")}
    val_ids = {r["id"] for r in read_jsonl(tmp_path / "prepared" / "arith_val.jsonl")}
    assert not train_ids & val_ids
