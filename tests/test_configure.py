"""Per-method invalidation: each run's settings and code closure (flows/configure.py,
core/codedeps.py). The behaviour with `dvc repro` is in tests/test_orchestration.py (slow)."""

import copy

import pytest
import yaml

from core.codedeps import closure, code_digest
from core.params import ROOT, validate
from flows.configure import build_config, configure, evaluate_config, train_config

RAW = yaml.safe_load((ROOT / "params.yaml").read_text())


def rel(files):
    return {str(p.relative_to(ROOT)) for p in files}


def test_closure_follows_lazy_relative_and_package_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import leaf\n")
    (pkg / "sub" / "leaf.py").write_text("import numpy\n")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import leaf  # lazy\n    from .b import g\n")
    (pkg / "b.py").write_text("g = 1\n")
    (pkg / "unused.py").write_text("")
    got = {str(p.relative_to(tmp_path)) for p in closure(["pkg.a"], tmp_path)}
    assert got == {"pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/sub/__init__.py", "pkg/sub/leaf.py"}
    before = code_digest(["pkg.a"], tmp_path)
    (pkg / "unused.py").write_text("x = 1\n")
    assert code_digest(["pkg.a"], tmp_path) == before
    (pkg / "b.py").write_text("g = 2\n")
    assert code_digest(["pkg.a"], tmp_path) != before


def test_each_method_trains_with_its_own_code():
    from rewards import entry_modules

    train = {m: rel(closure(["flows.train", *entry_modules(m)]))
             for m in ("rlvr", "random", "rlme", "rlvrr", "dro", "rlcer", "rationale")}
    assert {m for m, files in train.items() if "rewards/meta_eval.py" in files} == {"rlme"}
    assert {m for m, files in train.items() if "models/rlcer_trainer.py" in files} == {"rlcer"}
    assert {m for m, files in train.items() if "models/dro_trainer.py" in files} == {"dro"}
    assert all("rewards/verifiable.py" in files for files in train.values())  # held-out scoring
    evaluate = rel(closure(["flows.evaluate"]))
    assert "rewards/meta_eval.py" not in evaluate and "rewards/evaluator_prompt.py" in evaluate


def _configs(raw):
    params = validate(copy.deepcopy(raw))
    out = {("base", "evaluate"): evaluate_config(params, None)}
    for m in params.methods:
        out[(m, "train")] = train_config(params, m)
        out[(m, "evaluate")] = evaluate_config(params, m)
    return out


@pytest.mark.parametrize("key, value, expected", [
    ("template", "{problem}{solution}\nQuestion: {question}\nAnswer:",
     {(m, k) for m in ("rlme", "rlme_gt10") for k in ("train", "evaluate")}),
    # rlme_gt10 sets its own anchor_fraction; the evaluation does not read it.
    ("anchor_fraction", 0.5, {("rlme", "train")}),
])
def test_an_rlme_setting_changes_only_rlme_runs(key, value, expected):
    raw = copy.deepcopy(RAW)
    raw["methods"] = [*raw["methods"], "rlme_gt10", "r3_gate"]
    before = _configs(raw)
    raw["reward"]["rlme"][key] = value
    after = _configs(raw)
    assert {k for k in before if before[k] != after[k]} == expected


def test_shared_settings_reach_every_run_and_eval_settings_only_evaluation():
    raw = copy.deepcopy(RAW)
    before = _configs(raw)
    raw["grpo"]["learning_rate"] = 1e-5
    after = _configs(raw)
    assert {k for k in before if before[k] != after[k]} == {(m, "train") for m in raw["methods"]}
    raw = copy.deepcopy(RAW)
    raw["eval"]["k"] = 8
    assert {kind for (_, kind), c in _configs(raw).items() if c != before[(_, kind)]} == {"evaluate"}


def test_configure_writes_one_file_per_stage_and_drops_stale_ones(tmp_path):
    params = validate(copy.deepcopy(RAW))
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "train.json").write_text("{}")
    written = configure(params, tmp_path)
    assert set(written) == {"base/evaluate.json", "base/build.json"} | {f"{m}/{k}.json" for m in params.methods
                                                     for k in ("train", "evaluate")}
    assert not (tmp_path / "gone" / "train.json").exists()


def test_the_base_build_depends_on_its_resolved_settings_not_on_other_presets():
    before = build_config(validate(copy.deepcopy(RAW)))
    raw = copy.deepcopy(RAW)
    raw["presets"]["another"] = {"base_model": {"sft": {"steps": 10}}}  # defined, not selected
    raw["base_model"]["judge"]["steps"] = 7  # the on-demand judge's
    assert build_config(validate(raw)) == before
    raw["preset"] = "another"
    assert build_config(validate(raw))["sft"]["steps"] == 10
    raw = copy.deepcopy(RAW)
    raw["base_model"]["sft"]["roles"]["steps"] = 5
    assert build_config(validate(raw)) != before
