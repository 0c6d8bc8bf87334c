import copy

import pytest
import yaml

from core.params import PARAMS_FILE, ParamsError, load, validate


def raw():
    return yaml.safe_load(PARAMS_FILE.read_text())


def test_default_and_presets_validate():
    p = load()
    assert p.preset is None and "rlvr" in p.methods
    for name in raw()["presets"]:
        assert load(preset=name).preset == name


def test_misspelt_key_is_named():
    r = raw()
    r["world"]["arith"]["sloppy_fracc"] = 0.5
    with pytest.raises(ParamsError, match=r"world\.arith\.sloppy_fracc: unknown key"):
        validate(r)


def test_bad_value_is_named():
    r = raw()
    r["grpo"]["loss_type"] = "ppo2"
    with pytest.raises(ParamsError, match=r"grpo\.loss_type"):
        validate(r)


def test_unknown_preset_lists_known():
    with pytest.raises(ParamsError, match=r"preset 'nope' is not defined; known: \[.*'ci'"):
        validate(raw(), preset="nope")


def test_preset_override_of_unknown_key_is_named():
    r = raw()
    r["presets"]["bad"] = {"grpo": {"max_stepz": 3}}
    with pytest.raises(ParamsError, match=r"grpo\.max_stepz: unknown key"):
        validate(r, preset="bad")


def test_preset_merges_deeply():
    p = load(preset="ci")
    assert p.grpo.max_steps == 2 and p.grpo.learning_rate == raw()["grpo"]["learning_rate"]


def test_dvc_style_string_floats_are_coerced():
    r = copy.deepcopy(raw())
    r["grpo"]["learning_rate"] = "2e-05"  # what `dvc exp run -S` writes
    assert validate(r).grpo.learning_rate == 2e-5


def test_top_level_keys_are_commented():
    lines = PARAMS_FILE.read_text().splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith((" ", "#")) and ":" in line:
            assert lines[i - 1].startswith("#"), f"no comment above {line!r}"


def test_a_misspelt_key_is_one_line_naming_the_intended_key():
    r = raw()
    r["grpo"]["learnig_rate"] = r["grpo"].pop("learning_rate")
    with pytest.raises(ParamsError) as e:
        validate(r)
    assert str(e.value) == ("params.yaml: grpo.learnig_rate: unknown key "
                            "(did you mean learning_rate?)")


@pytest.mark.parametrize("key, template, bad", [
    ("reward.rlme.template", "{problem}{solution}\nQuestion: {questoin}\nAnswer:", "{questoin}"),
    ("reward.rlme.anchor_template", "The answer is {answer}.\n", "{answer}"),
    ("reward.rlcer.rubricator_template", "{problem}{cot}\nRubrics:", "{cot}"),
    ("eval.self_eval.template", "{problem}{solution}{}", "positional"),
    ("reward.rlme.template", "{problem}{solution", "not a valid template"),
])
def test_a_template_placeholder_typo_fails_at_load_naming_the_key(key, template, bad):
    r = raw()
    *parents, leaf = key.split(".")
    node = r
    for k in parents:
        node = node[k]
    node[leaf] = template
    with pytest.raises(ParamsError) as e:
        validate(r)
    (line,) = str(e.value).splitlines()
    assert line.startswith(f"params.yaml: {key}: ") and bad in line, line


def test_params_survive_dvc_exp_run_set_param(tmp_path):
    """`dvc exp run -S key=value` rewrites params.yaml through OmegaConf: quotes go (RLME's
    `"YES"` target is written bare) and so may comments. The values must not change."""
    import shutil

    from dvc.utils.hydra import apply_overrides

    p = tmp_path / "params.yaml"
    shutil.copy(PARAMS_FILE, p)
    apply_overrides(p, ["grpo.learning_rate=1e-4"])
    assert "target: YES\n" in p.read_text()  # the quotes are gone
    before, after = load(), load(p)
    assert after.grpo.learning_rate == 1e-4
    assert after.model_copy(update={"grpo": before.grpo}) == before


def test_no_preset_sets_the_bases_draws():
    """dvc.yaml's evaluate_base_draw stages come from the top-level `base_draws`: a preset's own
    list would name draws no stage runs, or stages whose evaluation refuses a draw it lacks (the
    ci preset once did, and its `dvc repro` failed)."""
    import yaml

    from core.params import ROOT

    presets = yaml.safe_load((ROOT / "params.yaml").read_text())["presets"]
    assert [name for name, p in presets.items() if "base_draws" in (p or {})] == []
