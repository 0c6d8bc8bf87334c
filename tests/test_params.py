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
    with pytest.raises(ParamsError, match=r"preset 'nope' is not defined; known: \['ci'"):
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
