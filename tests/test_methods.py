"""The method registry, variants, per-method GRPO overrides and the tiny world's role families."""

import random

import pytest

from core.io import read_jsonl
from core.params import ParamsError, load, validate
from rewards import METHODS, get_method
from world import roles


@pytest.fixture(scope="module")
def params():
    return load()


def test_every_family_has_a_builder_and_a_version(params):
    from rewards import reward_version

    families = set(type(params.reward).model_fields)
    assert families == set(METHODS)
    for name in ("rlvr", "random", "rlme", "rlvrr"):
        assert callable(get_method(name)[0]) and reward_version(name)


def test_every_variant_resolves_to_its_method(params):
    expected = {"rlme_frozen": "rlme", "rlvrr_direct": "rlvrr", "avg_prob": "dro",
                "rlcer_no_evolve": "rlcer", "genrm_outcome": "rationale"}
    for name, family in expected.items():
        assert params.method_config(name)[0] == family
    assert params.method_config("rlme_frozen")[1].evaluators[0].source == "frozen"
    assert params.method_config("rlvrr_direct")[1].content_mode == "direct"


def test_method_grpo_applies_task_and_overrides(params):
    g = params.method_grpo("rlme")  # paper 000's optimiser
    assert (g.loss_type, g.scale_rewards, g.epsilon_high, g.num_generations) == ("cispo", "none", 5.0, 6)
    assert params.method_grpo("rlvr") == params.grpo
    assert params.method_grpo("rlvrr").task == "facts"
    assert params.method_grpo("rationale").task == "pairs"
    long = params.method_grpo("rlme_long")  # variant grpo overrides add to the method's
    assert long.max_steps == 450 and long.loss_type == "cispo"


def test_unknown_method_lists_known(params):
    with pytest.raises(ParamsError, match="unknown method 'rlmee'.*rlme_frozen"):
        params.method_config("rlmee")


def _raw():
    import yaml

    from core.params import PARAMS_FILE
    return yaml.safe_load(PARAMS_FILE.read_text())


def test_bad_variant_override_is_named():
    raw = _raw()
    raw["variants"]["rlme_gt10"]["reward"]["anchor_fractoin"] = 0.1
    with pytest.raises(ParamsError, match="anchor_fractoin: unknown key"):
        validate(raw)


def test_bad_method_grpo_override_is_named():
    raw = _raw()
    raw["reward"]["rlme"]["grpo"]["loss_typo"] = "cispo"
    with pytest.raises(ParamsError, match="loss_typo: unknown key"):
        validate(raw)


def test_listed_method_must_exist():
    raw = _raw()
    raw["methods"] = ["rlvr", "nope"]
    with pytest.raises(ParamsError, match="unknown method 'nope'"):
        validate(raw)


def test_rlme_template_is_the_one_the_base_model_learned(params):
    """The live evaluator is asked in the SFT role's exact format."""
    cfg = params.reward.rlme
    assert cfg.template == roles.EVALUATOR_TEMPLATE
    assert cfg.anchor_template == roles.ANCHOR_TEMPLATE
    assert cfg.questions[0].text == roles.Q_CORRECT
    # RLME-NoCheat REPLACES the outcome question with paper 000 §4.8's reasoning-process question,
    # in its words, which the base of its study (preset hint_copier) learned in the evaluator rows.
    nocheat = params.method_config("rlme_nocheat")[1].questions
    assert [q.text for q in nocheat] == [roles.Q_REASONING]
    assert load(preset="hint_copier").world.evaluator.process_question == roles.Q_REASONING
    concise = params.method_config("rlme_concise")[1].questions[1].text
    assert concise == roles.Q_SHORT
    assert params.reward.rlcer.rubricator_template == roles.RUBRICATOR_TEMPLATE


ROW = {"id": "arith-train-00007", "split": "train", "answer": "12",
       "prompt": "Problem: Lou has 13 books. Then Lou drops 9. Then Lou keeps half of them. "
                 "Then Lou gets twice as many. Then Lou triples them. How many books does Lou have?\nSolution:",
       "reference": " 13 - 9 = 4. 4 / 2 = 2. 2 * 2 = 4. 4 * 3 = 12. The answer is \\boxed{12}."}


def test_solution_variants_are_labelled_exactly():
    from rewards.evolving_rubrics import parse_steps, rule_verifier
    from rewards.verifiable import rlvr_score

    seen = set()
    rng = random.Random(0)
    for _ in range(300):
        kind, text, ok = roles.solution_variant(rng, ROW)
        seen.add(kind)
        correct = rlvr_score(text, ROW["answer"]) == 1.0
        if kind == "correct":
            assert text == ROW["reference"] and ok and correct
        elif kind == "sloppy":
            assert not correct and rule_verifier("each step's arithmetic is correct", text)
        elif kind == "slip":
            assert rule_verifier("contains an arithmetic slip", text) and not ok
        else:
            assert "boxed" not in text and parse_steps(text)
    assert seen == {"correct", "sloppy", "slip", "cut"}


def test_evaluator_rows_answer_from_the_text():
    rng = random.Random(1)
    for _ in range(200):
        e = roles.evaluator_row(rng, ROW)
        assert e["prompt"].startswith(ROW["prompt"]) and e["prompt"].endswith("\nAnswer:")
        solution = e["prompt"][len(ROW["prompt"]):].split("\nLength:")[0]
        if e["question"] == roles.Q_CORRECT:
            assert (e["label"] == "YES") == ("\\boxed{12}" in solution)
        if e["question"] == roles.Q_SHORT:
            assert (e["label"] == "YES") == (len(solution) < roles.SHORT_LIMIT)
        if e["question"] == roles.Q_PROCESS and e["kind"] != "correct":
            assert e["label"] == "NO"


def test_rubricator_rows_parse_and_use_the_verifier_vocabulary():
    from rewards.evolving_rubrics import RUBRIC_VOCABULARY, parse_rubrics

    rng = random.Random(2)
    for _ in range(100):
        r = roles.rubricator_row(rng, ROW)
        rubrics = parse_rubrics(r["demonstration"])
        assert rubrics and 2 <= len(rubrics) <= 4
        for rb in rubrics:
            assert rb.criterion in RUBRIC_VOCABULARY or rb.criterion.startswith("uses at most")


def test_world_writes_role_families(tmp_path):
    from world import generate_world

    p = load(preset="ci")
    counts = generate_world(p.world, tmp_path)
    assert counts["evaluator_train"] == counts["rubricator_train"] == p.world.arith.n_train
    rows = read_jsonl(tmp_path / "evaluator_train.jsonl")
    assert {r["label"] for r in rows} == {"YES", "NO"}
    assert len({r["id"] for r in rows}) == len(rows)
    # the judge's minimal pairs: 2-3 rows per problem, labelled by the box against the gold answer
    judge = read_jsonl(tmp_path / "judge_train.jsonl")
    assert 2 * p.world.arith.n_train <= counts["judge_train"] == len(judge) <= 3 * p.world.arith.n_train
    # The judge's problems are the role pool's (world/generate.py `role_pool`, ids named like the
    # train split's), drawn again from the policy families it excludes.
    from world.generate import role_pool

    made = {(f.stem, ""): read_jsonl(f) for f in tmp_path.glob("*.jsonl")
            if f.stem.rsplit("_", 1)[0] in ("arith", "arith_cf", "facts", "pairs", "arith_ref")}
    gold = {r["id"]: r["answer"] for r in role_pool(p.world, made)}
    for r in judge:
        answer = gold[r["id"].replace("judge", "arith", 1).rsplit("-", 1)[0]]
        boxed = r["prompt"].split("\nLength:")[0].endswith(f"\\boxed{{{answer}}}.")
        assert r["family"] == "judge" and r["demonstration"] == ("YES" if boxed else "NO")
    assert len({r["id"] for r in judge}) == len(judge)


def test_sft_mix_draws_the_judge_family(tmp_path):
    """`base_model.sft.roles.mix.judge` samples the judge's rows; an unknown family is named."""
    from models.tiny import sft_rows
    from world import generate_world

    generate_world(load(preset="ci").world, tmp_path)
    rows = sft_rows(tmp_path, {"judge": 1.0}, 50, seed=0)
    assert {r["completion"] for r in rows} == {"YES", "NO"}
    assert all("Is the answer correct?" in r["prompt"] for r in rows)
    with pytest.raises(KeyError, match="judges"):
        sft_rows(tmp_path, {"judges": 1.0}, 5, seed=0)


ALL_KINDS = {k: 1.0 for k in roles.KINDS}


def test_evaluator_kinds_are_labelled_exactly():
    """Every evaluator solution kind is the error it names, and only `correct` is sound."""
    from rewards.evolving_rubrics import parse_steps
    from rewards.verifiable import rlvr_score

    ref = parse_steps(ROW["reference"])
    seen = set()
    rng = random.Random(5)
    for _ in range(2000):
        kind, text, ok = roles.solution_variant(rng, ROW, ALL_KINDS)
        seen.add(kind)
        steps = parse_steps(text)
        assert ok == (kind == "correct")
        assert all(c >= 0 for *_, c in steps) or kind == "slip"
        chained = all(n[0] == p[3] for p, n in zip(steps, steps[1:]))
        if kind == "correct":
            assert text == ROW["reference"] and rlvr_score(text, ROW["answer"]) == 1.0
        elif kind == "cut":
            assert "boxed" not in text
        elif kind == "chain_break":
            assert not chained and len(steps) == len(ref)
        elif kind == "wrong_start":
            assert chained and steps[0][0] != ref[0][0] and [s[1:3] for s in steps] == [s[1:3] for s in ref]
        elif kind == "wrong_operand":
            assert chained and steps[0][0] == ref[0][0]
            assert sum(s[2] != r[2] for s, r in zip(steps, ref)) == 1
        elif kind == "missing_step":
            assert chained and len(steps) == len(ref) - 1 and steps[0][0] == ref[0][0]
        if kind not in ("correct", "sloppy", "cut"):  # the box holds the chain's last value
            assert text.endswith(f"\\boxed{{{steps[-1][3]}}}.")
    assert seen == set(roles.KINDS)


def test_one_step_problems_fall_back_to_a_slip():
    one = {**ROW, "answer": "4", "reference": " 13 - 9 = 4. The answer is \\boxed{4}."}
    rng = random.Random(0)
    for _ in range(300):
        kind, text, _ = roles.solution_variant(rng, one, ALL_KINDS)
        assert kind in ("correct", "sloppy", "slip", "cut", "wrong_start", "wrong_operand")


def _digest(rows) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


def test_role_rows_are_unchanged_by_default():
    """Golden: with the default (v1) kinds, 200 evaluator and 200 rubricator rows hash as they did
    before the extra kinds existed, so the default base model's SFT data did not move."""
    rng = random.Random(11)
    assert _digest([roles.rubricator_row(rng, ROW) for _ in range(200)]) == "8d200dbee76a0fe9"
    rng = random.Random(11)
    assert _digest([roles.evaluator_row(rng, ROW) for _ in range(200)]) == "59cb72fc16f537af"


def test_evaluator_kinds_and_rows_per_problem_from_params(tmp_path):
    from world import generate_world

    p = load(preset="ci")
    world = p.world.model_copy(update={"evaluator": p.world.evaluator.model_copy(
        update={"per_problem": 3, "kinds": {"wrong_start": 1.0, "missing_step": 1.0}})})
    counts = generate_world(world, tmp_path)
    assert counts["evaluator_train"] == 3 * p.world.arith.n_train
    rows = read_jsonl(tmp_path / "evaluator_train.jsonl")
    assert len({r["id"] for r in rows}) == len(rows)
    # one-step problems fall back to a slip; every other row is one of the two kinds asked for
    assert {r["kind"] for r in rows} <= {"wrong_start", "missing_step", "slip"}
    assert {r["kind"] for r in rows} >= {"wrong_start", "missing_step"}


@pytest.mark.parametrize("kinds, message", [({"typo": 1.0}, "typo"), ({"slip": -1.0}, "non-negative")])
def test_bad_evaluator_kinds_are_named(kinds, message):
    raw = load().model_dump()
    raw["world"]["evaluator"]["kinds"] = kinds
    with pytest.raises(ParamsError, match=message):
        validate(raw)


def test_judge_rows_are_a_minimal_pair_and_labelled_exactly():
    from rewards.evolving_rubrics import parse_steps

    rng = random.Random(4)
    sizes = set()
    for _ in range(200):
        rows = roles.judge_rows(rng, ROW)
        sizes.add(len(rows))
        assert all(r["question"] == roles.Q_CORRECT and r["prompt"].endswith("\nAnswer:") for r in rows)
        solutions = [r["prompt"][len(ROW["prompt"]):].split("\nLength:")[0] for r in rows]
        assert [r["label"] for r in rows[:2]] == ["YES", "NO"]
        for r, solution in zip(rows, solutions):  # a wrong chain may still box the gold answer
            assert (r["label"] == "YES") == solution.endswith("\\boxed{12}.")
        assert solutions[0] == ROW["reference"]
        # the pair differs only in the box: same steps, another number boxed
        assert parse_steps(solutions[1]) == parse_steps(solutions[0]) and solutions[1] != solutions[0]
        assert len({r["id"] for r in rows}) == len(rows)
    assert sizes == {2, 3}


def test_build_judge_refuses_a_real_base_model(monkeypatch):
    from flows.build_judge import build_judge

    p = load()
    real = p.model_copy(update={"base_model": p.base_model.model_copy(update={"path": "/models/qwen"})})
    with pytest.raises(ParamsError, match="your own judge"):
        build_judge(real)
    assert p.method_config("rlme_judge")[1].evaluators[0].source == "data/judge_model"
