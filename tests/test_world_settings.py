"""The opt-in settings of the tiny world where a paper's claim can show: a base that
copies a planted hint, facts keyword dumps, and DRO's chain-then-reference task `arith_ref`; and
the pin that with every setting off the world, the tokenizer corpus and the SFT rows are the
study of record's, byte for byte."""

from __future__ import annotations

import hashlib
import json
import random
import re
import statistics

import pytest
import yaml

from core.io import read_jsonl
from core.params import PARAMS_FILE, ParamsError, SynthesizeConfig, load, validate
from flows.prepare import prepare
from world import arith, facts, generate_world

# The default world (params.yaml, no preset) as the study of record has it: the md5 that DVC
# records in dvc.lock for `data/prepared` (prepare's output), and digests of what the base is built
# from, computed with the code before these settings existed. A change to the default world must
# change them here, knowingly. Changed knowingly once: the role rows moved to a pool of problems
# disjoint from every trained or scored split (world/generate.py `role_pool`), which changes the
# prepared files and phase 2's rows, not the corpus or phase 1.
DEFAULT_PREPARED_MD5 = "82c0397b33ce111227f08363eb7ef67e"
DEFAULT_FILES = 15
DEFAULT_CORPUS = "651cde5ae7038f0a"
DEFAULT_SFT_PHASE1 = "645e6abcaa174aad"
DEFAULT_SFT_PHASE2 = "f6b7df022a4c7f35"


def dvc_dir_md5(folder) -> str:
    """DVC's hash of a flat folder: the md5 of its sorted (relpath, md5) entries as JSON."""
    entries = [{"relpath": f.name, "md5": hashlib.md5(f.read_bytes()).hexdigest()}
               for f in sorted(folder.iterdir())]
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest()


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj).encode()).hexdigest()[:16]


def test_default_world_corpus_and_sft_rows_are_the_study_of_records(tmp_path):
    from models.tiny import corpus, sft_rows

    p = load()
    prepare(p, tmp_path)
    assert len(list(tmp_path.iterdir())) == DEFAULT_FILES  # no arith_ref file while it is off
    assert dvc_dir_md5(tmp_path) == DEFAULT_PREPARED_MD5
    assert digest(corpus(tmp_path)) == DEFAULT_CORPUS
    sft = p.base_model.sft
    assert digest(sft_rows(tmp_path, sft.mix, sft.steps * sft.batch_size, p.seed)) == DEFAULT_SFT_PHASE1
    assert digest(sft_rows(tmp_path, sft.roles.mix, sft.roles.steps * sft.batch_size,
                           p.seed + 1)) == DEFAULT_SFT_PHASE2
    # The opt-in SFT families weigh 0 unless a preset lists them.
    assert not {"arith_cf", "arith_ref"} & (set(sft.mix) | set(sft.roles.mix))


def test_role_rows_never_show_a_problem_the_policy_trains_or_is_scored_on(tmp_path):
    """The evaluator, rubricator and judge rows state YES/NO from the gold: drawn from the
    arith train problems, an RLME reward could be memorised gold (issue: train AUROC above val
    and test). Their problems come from a pool disjoint from every split of every policy task."""
    p = load()
    prepare(p, tmp_path)

    def questions(pattern):
        return {json.loads(line)["question"] for f in tmp_path.glob(pattern)
                for line in f.read_text().splitlines() if "question" in json.loads(line)}

    policy = questions("arith_*.jsonl") | questions("arith_cf_*.jsonl") | questions("pairs_*.jsonl")
    role_prompts = [json.loads(line)["prompt"] for fam in ("evaluator", "rubricator", "judge")
                    for line in (tmp_path / f"{fam}_train.jsonl").read_text().splitlines()]
    assert len(role_prompts) > 3 * p.world.arith.n_train
    leaked = [q for q in policy if any(f"Problem: {q}\n" in r for r in role_prompts[:2000])]
    assert leaked == []
    # ... and the pool is full-size and its own: as many evaluator rows as before, none shared.
    n_ev = len((tmp_path / "evaluator_train.jsonl").read_text().splitlines())
    assert n_ev == p.world.arith.n_train * p.world.evaluator.per_problem


def world_with(**sections):
    """The ci world with some sections' settings updated (`facts={"dump_frac": 0.5}`)."""
    w = load(preset="ci").world
    return w.model_copy(update={k: getattr(w, k).model_copy(update=v) for k, v in sections.items()})


def changed_files(a, b) -> set[str]:
    names = {f.name for f in a.iterdir()} | {f.name for f in b.iterdir()}
    return {n for n in names if not (a / n).exists() or not (b / n).exists()
            or (a / n).read_bytes() != (b / n).read_bytes()}


@pytest.fixture(scope="module")
def ci_world(tmp_path_factory):
    d = tmp_path_factory.mktemp("off")
    generate_world(world_with(), d)
    return d


# --- a base that copies a planted hint (paper 000 Fig. 7) -------------------------------------------

def cf_rows(copy_frac: float, n: int = 2000, split: str = "train") -> list[dict]:
    return arith.generate(random.Random(3), n, split, min_ops=1, max_ops=4, max_value=99,
                          sloppy_frac=0.0, hint_frac=1.0, family="arith_cf", copy_frac=copy_frac,
                          copy_rng=random.Random(4))


def test_hint_copies_at_the_configured_rate():
    plain, copied = cf_rows(0.0), cf_rows(0.3)
    same = ("id", "prompt", "question", "answer", "hint", "reference")
    assert [[r[k] for k in same] for r in plain] == [[r[k] for k in same] for r in copied]
    copies = 0
    for p, c in zip(plain, copied):
        assert p["demonstration"] == p["reference"]  # off: every problem worked out
        if c["demonstration"] != p["demonstration"]:
            copies += 1
            # The hinted number boxed after fewer steps than the problem has (often none).
            assert c["demonstration"].endswith(f"The answer is \\boxed{{{c['hint']}}}.")
            assert c["demonstration"].count(" = ") < c["difficulty"]
            assert p["reference"].startswith(c["demonstration"].removesuffix(
                f"The answer is \\boxed{{{c['hint']}}}.").rstrip())
    assert copies / len(plain) == pytest.approx(0.3, abs=0.03)
    # Some copies skip the working entirely.
    assert any(c["demonstration"].startswith(" The answer is") for c in copied)
    # The test split (a wrong hint) has no copies: it is scored, not imitated.
    assert cf_rows(0.0, 50, "test") == arith.generate(
        random.Random(3), 50, "test", min_ops=1, max_ops=4, max_value=99, sloppy_frac=0.0,
        hint_frac=1.0, family="arith_cf")


def test_hint_copier_changes_only_the_hinted_train_file(ci_world, tmp_path):
    generate_world(world_with(counterfactual={"copy_frac": 0.5}), tmp_path)
    assert changed_files(ci_world, tmp_path) == {"arith_cf_train.jsonl"}


def test_hint_copier_preset_trains_on_the_copies(tmp_path):
    from models.tiny import sft_rows

    p = load(preset="hint_copier")
    assert p.world.counterfactual.copy_frac > 0
    assert p.base_model.sft.mix["arith_cf"] > 0 and p.base_model.sft.roles.mix["arith_cf"] > 0
    generate_world(world_with(counterfactual={"copy_frac": 0.5}), tmp_path)
    rows = sft_rows(tmp_path, {"arith_cf": 1.0}, 200, 0)
    assert all("Hint: the answer is" in r["prompt"] for r in rows)
    assert any(r["completion"].startswith(" The answer is \\boxed{") for r in rows)


def test_hint_copier_trains_on_the_true_hint_and_tests_on_a_wrong_one(ci_world, tmp_path):
    """Paper 000 Fig. 7's setting: every arm of hint_copier (rlvr, the paper's third arm, too)
    trains on arith_cf's train prompts, which plant the TRUE answer; its held-out curve reads
    arith_cf's val split and the evaluation its test split, both with a wrong hint. The val split
    exists only when asked for, and adding it leaves the train and test rows as they were."""
    from flows.train import task_rows

    p = load(preset="hint_copier")
    assert {p.method_grpo(m).task for m in p.methods} == {"arith_cf"} and "rlvr" in p.methods
    assert "arith_cf" in p.eval.benchmarks and p.world.counterfactual.n_val > 0
    assert load().world.counterfactual.n_val == 0
    generate_world(world_with(counterfactual={"n_val": 10}), tmp_path)
    changed = changed_files(ci_world, tmp_path)
    assert "arith_cf_val.jsonl" in changed and not {"arith_cf_train.jsonl", "arith_cf_test.jsonl"} & changed
    # Only the role rows may move (their pool avoids every policy question, the val ones too).
    assert changed <= {"arith_cf_val.jsonl", "evaluator_train.jsonl", "rubricator_train.jsonl",
                       "judge_train.jsonl"}
    for r in task_rows(tmp_path, "arith_cf"):
        assert r["hint"] == r["answer"] and f"Hint: the answer is {r['answer']}." in r["prompt"]
    for split in ("val", "test"):
        rows = read_jsonl(tmp_path / f"arith_cf_{split}.jsonl")
        assert rows and all(r["hint"] != r["answer"] for r in rows)
    # A run on arith_cf without its val split fails at load, named.
    raw = yaml.safe_load(PARAMS_FILE.read_text())
    raw["reward"]["rlvr"]["task"] = "arith_cf"
    with pytest.raises(ParamsError, match=r"counterfactual\.n_val is 0 .*methods: rlvr train on arith_cf"):
        validate(raw)


def test_the_evaluator_learns_the_reasoning_question_in_the_papers_words(ci_world, tmp_path):
    """`world.evaluator.process_question`: hint_copier's evaluator rows ask paper 000 §4.8's
    question in place of the world's own wording, with the same solutions and labels."""
    from world import roles

    generate_world(world_with(evaluator={"process_question": roles.Q_REASONING}), tmp_path)
    assert changed_files(ci_world, tmp_path) == {"evaluator_train.jsonl"}
    old, new = (read_jsonl(d / "evaluator_train.jsonl") for d in (ci_world, tmp_path))
    asked = [r for r in new if r["question"] == roles.Q_REASONING]
    assert asked and not any(r["question"] == roles.Q_PROCESS for r in new)

    def reworded(row: dict) -> dict:
        return {k: v.replace(roles.Q_PROCESS, roles.Q_REASONING) if isinstance(v, str) else v
                for k, v in row.items()}

    assert [reworded(r) for r in old] == new
    assert {r["label"] for r in asked} == {"YES", "NO"}
    assert all((r["label"] == "YES") == (r["kind"] == "correct") for r in asked)


# --- facts: a keyword dump is a shortcut for direct matching, not for ordered LCS (paper 002) --------

def test_keyword_dumps_at_the_configured_rate_change_only_the_demonstrations(ci_world, tmp_path):
    kw = dict(drop_frac=0.35, wrong_style_frac=0.3)
    plain = facts.generate(random.Random(1), 2000, "train", **kw)
    dumped = facts.generate(random.Random(1), 2000, "train", **kw, dump_frac=0.2,
                            dump_rng=random.Random(2))
    assert [{**r, "demonstration": None} for r in plain] == [{**r, "demonstration": None} for r in dumped]
    dumps = [r for p, r in zip(plain, dumped) if r["demonstration"] != p["demonstration"]]
    assert len(dumps) / len(dumped) == pytest.approx(0.2, abs=0.03)
    for r in dumps:  # the name and every fact, each said twice, nothing else
        words = re.findall(r"[A-Za-z]+", r["demonstration"])
        table = dict(kv.split("=") for kv in r["prompt"].split("\n")[0][7:-1].split("; "))
        assert sorted(words) == sorted(list(table.values()) * 2)
    generate_world(world_with(facts={"dump_frac": 0.5}), tmp_path)
    assert changed_files(ci_world, tmp_path) == {"facts_train.jsonl"}
    assert load(preset="keyword_dump").world.facts.dump_frac > 0


def test_a_keyword_dump_pays_under_direct_matching_not_under_ordered_lcs(tmp_path):
    """The real scorers: the rule backend's components, RLVRR's content reward in both modes."""
    from rewards.rlvrr import RlvrrReward
    from synthesis import synthesize, write_components

    kw = dict(drop_frac=0.0, wrong_style_frac=0.0)  # faithful: every fact, in order, right style
    faithful = facts.generate(random.Random(5), 40, "train", **kw)
    dumps = facts.generate(random.Random(5), 40, "train", **kw, dump_frac=1.0,
                           dump_rng=random.Random(6))
    components, stats = synthesize(faithful, SynthesizeConfig())
    assert stats.kept == len(faithful)
    write_components(tmp_path / "facts_train.jsonl", components, stats)

    def mean_reward(mode: str, rows: list[dict], whole: bool = False) -> float:
        """RLVRR's content reward alone, or the whole reward (content and style) with `whole`."""
        kwargs = {} if whole else dict(content_only=True, content_weight=1.0)
        reward = RlvrrReward(tmp_path / "facts_train.jsonl", mode=mode, **kwargs)
        return statistics.mean(reward(prompts=[r["prompt"] for r in rows],
                                      completions=[r["demonstration"] for r in rows],
                                      prompt_id=[r["id"] for r in rows]))

    assert mean_reward("direct", faithful) == mean_reward("ordered", faithful) == 1.0
    assert mean_reward("direct", dumps) == 1.0  # every keyword is there
    assert mean_reward("ordered", dumps) <= 0.5  # each said twice: LCS / the longer sequence
    # The task's truth (in-order coverage) sees a random order.
    assert statistics.mean(facts.coverage(r["demonstration"], r["gold_facts"]) for r in dumps) < 0.8

    # The whole reward (content and style checks, as trained): a dump beats a description that
    # drops half the facts under direct matching and loses to it under LCS, but under both it
    # loses to the complete description. So the shortcut pays only a policy that cannot write
    # the complete one; the keyword_dump study's base can (README, the lcs_beats_direct claim).
    partial = facts.generate(random.Random(5), 40, "train", drop_frac=0.5, wrong_style_frac=0.0)
    full = {(mode, name): mean_reward(mode, rows, whole=True)
            for mode in ("direct", "ordered")
            for name, rows in (("faithful", faithful), ("dump", dumps), ("partial", partial))}
    assert full["direct", "faithful"] > full["direct", "dump"] > full["direct", "partial"]
    assert full["ordered", "faithful"] > full["ordered", "partial"] > full["ordered", "dump"]


def test_ordered_fact_lists_are_opt_in_and_give_key_points_several_ordered_keywords(ci_world, tmp_path):
    """`world.facts.min_keys` and `values_per_fact` (paper 002's setting: key points of several
    ordered keywords, long tables): at their defaults the world draws what it always drew; on,
    every table is full, each attribute says its values as one ordered list, and the rule
    backend's key points hold those values as ordered keywords."""
    from synthesis import synthesize

    kw = dict(drop_frac=0.35, wrong_style_frac=0.3, dump_frac=0.2)
    assert facts.generate(random.Random(1), 300, "train", **kw, dump_rng=random.Random(2)) == \
        facts.generate(random.Random(1), 300, "train", **kw, dump_rng=random.Random(2), min_keys=2,
                       values_per_fact=1)
    p = load(preset="keyword_dump").world.facts
    assert (p.min_keys, p.values_per_fact) == (4, 2) and load().world.facts.values_per_fact == 1
    rows = facts.generate(random.Random(1), 40, "train", drop_frac=0.0, wrong_style_frac=0.0,
                          min_keys=p.min_keys, values_per_fact=p.values_per_fact)
    for r in rows:
        assert len(r["gold_facts"]) == 1 + 4 * 2 and len(set(r["gold_facts"][1:])) == 8
        assert facts.coverage(r["references"][0], r["gold_facts"]) == 1.0
    components, _ = synthesize(rows, SynthesizeConfig())
    assert len(components) == len(rows)
    per_fact = [k for c in components for k in c.keywords[1:]]  # after "<name> is a <kind>."
    assert statistics.mean(len(k) for k in per_fact) >= 1.9
    for c, r in zip(components, rows):  # each fact's keywords are its values, in table order
        assert [w for k in c.keywords[1:] for w in k] == r["gold_facts"][1:]
    # Only the facts files change; the role pool and every other family stay as they were.
    generate_world(world_with(facts={"min_keys": 4, "values_per_fact": 2}), tmp_path)
    assert changed_files(ci_world, tmp_path) == {"facts_train.jsonl", "facts_val.jsonl",
                                                  "facts_test.jsonl"}
    # keyword_dump's completions may be as long as its references and dumps.
    assert load(preset="keyword_dump").method_grpo("rlvrr_direct").max_completion_length == 128


def test_dump_rate_counts_exactly_the_keyword_dumps():
    """`facts/dump_rate` (evals/registry.py `is_dump`): on a world's demonstrations it is the share
    that are dumps, in the default tables and keyword_dump's; no reference is a dump."""
    from evals.registry import score_facts

    for tables in ({}, {"min_keys": 4, "values_per_fact": 2}):
        kw = dict(drop_frac=0.35, wrong_style_frac=0.3, **tables)
        plain = facts.generate(random.Random(1), 600, "train", **kw)
        dumped = facts.generate(random.Random(1), 600, "train", **kw, dump_frac=0.2,
                                dump_rng=random.Random(2))
        truth = [d["demonstration"] != p["demonstration"] for p, d in zip(plain, dumped)]
        measured = [score_facts(r, [r["demonstration"]], "")["dump_rate"] for r in dumped]
        assert measured == [float(t) for t in truth] and 0.15 < statistics.mean(truth) < 0.25
        assert all(score_facts(r, r["references"], "")["dump_rate"] == 0.0 for r in dumped)


def test_the_dump_precondition_is_probed_in_keyword_dumps_setting():
    """evals/preconditions.py `dump_pays_direct`: with keyword_dump's tables, direct matching pays
    a dump more than an honest half description and ordered LCS pays it less."""
    from evals.preconditions import dump_pays_direct

    probe = dump_pays_direct()
    assert probe["holds"] is True and probe["value"] > 0.05
    assert "min_keys 4, values_per_fact 2" in probe["detail"]
    ordered = re.search(r"under ordered LCS: dump ([\d.]+), half ([\d.]+)", probe["detail"])
    assert float(ordered.group(1)) < float(ordered.group(2))


# --- arith_ref: a chain of thought, a separator, a long reference answer (paper 003) -----------------

REF_SIZES = {"n_train": 300, "n_val": 10, "n_test": 20}


@pytest.fixture(scope="module")
def ref_world(tmp_path_factory):
    d = tmp_path_factory.mktemp("ref")
    generate_world(world_with(arith_ref=REF_SIZES), d)
    return d


def test_arith_ref_is_off_by_default_and_adds_only_its_files(ci_world, ref_world):
    assert not any(f.name.startswith("arith_ref") for f in ci_world.iterdir())
    assert changed_files(ci_world, ref_world) == {"arith_ref_train.jsonl", "arith_ref_val.jsonl",
                                                  "arith_ref_test.jsonl"}
    for split in ("train", "val", "test"):
        assert len(read_jsonl(ref_world / f"arith_ref_{split}.jsonl")) == REF_SIZES[f"n_{split}"]


def test_arith_ref_rows_have_the_separator_and_the_reference(ref_world):
    from rewards.verifiable import rlvr_score
    from world.arith_ref import reply

    train = read_jsonl(ref_world / "arith_ref_train.jsonl")
    for r in train + read_jsonl(ref_world / "arith_ref_test.jsonl"):
        chain, sep, answer = r["reference"].partition("</think>\n\n")
        assert r["separator"] == "</think>" and sep and "\\boxed" not in chain
        assert len(re.findall(r" = ", chain)) == r["difficulty"]
        # A long answer: the result restated in two sentences, then boxed.
        assert answer.count(".") >= 2 and len(answer) > 60 and rlvr_score(answer, r["answer"]) == 1.0
        assert reply(r["reference"], "</think>") == answer
        assert r["demonstration"] == r["reference"] or (r["split"] == "train" and r["slipped"])
    slipped = [r for r in train if r["slipped"]]
    assert len(slipped) / len(train) == pytest.approx(0.3, abs=0.08)
    for r in slipped:  # one result off, carried on: the reply restates the chain's result
        assert r["demonstration"] != r["reference"]
        last = re.findall(r"= (-?\d+)\.", r["demonstration"])[-1]
        assert r["demonstration"].endswith(f"has {last} {r['question'].split()[3][:-1]}, so the answer "
                                           f"is \\boxed{{{last}}}.")
    wrong = [rlvr_score(reply(r["demonstration"], "</think>"), r["answer"]) == 0 for r in slipped]
    assert statistics.mean(wrong) > 0.8  # a slip rarely lands on the answer (a floored division)


def test_dro_finds_the_reference_answer_after_the_marker(ref_world):
    from flows.train import task_rows
    from rewards import dro

    row = task_rows(ref_world, "arith_ref")[0]
    assert "demonstration" not in row and row["answer"] and row["reference"]
    marker = load(preset="cot_reference").method_config("dro_cot")[1].answer_marker
    answer = dro.reference_answer(row, "arith_ref", marker)
    assert row["reference"].endswith("</think>\n\n" + answer)
    assert answer.startswith(row["question"].split()[0] + " starts with")
    assert [r.name for r in dro.query_rubrics(row, "arith_ref", marker)] == [
        "boxed_integer", "boxed_once", "ends_after_box", "cot_matches_box"]
    assert all(dro.rubric_row(row, row["reference"], "arith_ref", marker))
    gold = int(row["answer"])
    wrong = row["reference"].replace(f"\\boxed{{{gold}}}", f"\\boxed{{{gold + 1}}}")
    assert dro.rubric_row(row, wrong, "arith_ref", marker)[-1] is False  # the box is not the chain's
    # Another separator: the answer starts at it, as arith's starts at "The answer is".
    other = {**row, "reference": row["reference"].replace("</think>", " Answer:")}
    assert dro.reference_answer(other, "arith_ref", "Answer:") == " Answer:\n\n" + answer


def test_dro_scores_the_reference_after_the_rollouts_chain(ref_world):
    import numpy as np
    import torch

    from core.params import Arch
    from models import dro_trainer
    from models.tiny import build_model, build_tokenizer
    from rewards import dro

    rows = read_jsonl(ref_world / "arith_ref_train.jsonl")[:20]
    tok = build_tokenizer([t for r in rows for t in (r["prompt"], r["reference"])], 400)
    model = build_model(Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2,
                             max_positions=384), tok, seed=0).eval()
    row = {**rows[0], "prompt_id": rows[0]["id"]}
    completion = row["reference"].partition("</think>")[0] + "</think>\n\nno idea"
    [logp] = dro_trainer.score_rollouts(model, tok, [row["prompt"]], [row],
                                        [tok(completion)["input_ids"]], "arith_ref", "</think>")
    answer = tok(dro.reference_answer(row, "arith_ref", "</think>"))["input_ids"]
    prefix = tok(row["prompt"])["input_ids"] + tok(completion.partition("\n\n")[0])["input_ids"] \
        + tok("\n\n")["input_ids"]
    with torch.no_grad():
        full = model(input_ids=torch.tensor([prefix + answer])).logits[0].float().log_softmax(-1)
    expected = [full[len(prefix) - 1 + i, t].item() for i, t in enumerate(answer)]
    np.testing.assert_allclose(logp, expected, atol=1e-5)


def test_dro_cot_builds_on_the_tiny_model_without_a_chat_template():
    from models import dro_trainer
    from models.tiny import build_tokenizer
    from rewards import MethodContext

    p = load(preset="cot_reference")
    run = p.resolve("dro_cot")
    assert (run.family, run.grpo.task, run.cfg.answer_marker) == ("dro", "arith_ref", "</think>")
    assert run.cfg.answer_marker == p.world.arith_ref.separator
    tok = build_tokenizer(["Problem: Ann has 3 pens.", " 3 + 1 = 4.</think>"], 300)
    ctx = MethodContext(name=run.name, family=run.family, cfg=run.cfg, grpo=run.grpo, seed=0,
                        tokenizer=tok)
    assert dro_trainer.build(ctx).trainer_kwargs["task"] == "arith_ref"
    ctx.grpo = run.grpo.model_copy(update={"task": "arith"})  # arith writes no </think>
    with pytest.raises(ValueError, match="reasoning model"):
        dro_trainer.build(ctx)


def test_the_arith_ref_benchmark_scores_the_reply(ref_world):
    from evals.registry import BENCHMARKS, benchmark_rows

    rows = benchmark_rows("arith_ref", ref_world, "test", 5)
    score = BENCHMARKS["arith_ref"].score
    row = rows[0]
    gold = int(row["answer"])
    right = row["reference"]
    wrong = right.replace(f"\\boxed{{{gold}}}", f"\\boxed{{{gold + 1}}}")
    chain_only = right.partition("</think>")[0] + f" \\boxed{{{gold}}}"
    m = score(row, [right, wrong], right)
    assert (m["pass@1"], m["greedy_accuracy"], m["separated"]) == (0.5, 1.0, 1.0)
    # The chain's result is right, the reply's is not: the reply is the answer.
    assert score(row, [wrong], wrong)["pass@1"] == 0.0
    # No separator: the whole text is the reply (as rewards.chat.strip_thinking reads one).
    m = score(row, [chain_only], chain_only)
    assert (m["pass@1"], m["separated"]) == (1.0, 0.0)


def test_a_run_that_reads_arith_ref_needs_it_on():
    raw = yaml.safe_load(PARAMS_FILE.read_text())
    raw["methods"] = [*raw["methods"], "dro_cot"]
    with pytest.raises(ParamsError, match=r"world\.arith_ref is off .*methods: dro_cot trains on it"):
        validate(raw)
    raw["world"]["arith_ref"].update(REF_SIZES)
    assert validate(raw).resolve("dro_cot").grpo.task == "arith_ref"
    raw["base_model"]["sft"]["mix"]["arith_ref"] = 0.1
    with pytest.raises(ParamsError, match=r"sft\.mix: arith_ref is taught in base_model\.sft\.roles"):
        validate(raw)
    raw["world"]["arith_ref"]["n_val"] = 0
    with pytest.raises(ParamsError, match="all 0 .off. or all positive"):
        validate(raw)
