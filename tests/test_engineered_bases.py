"""The bases with an engineered prior (docs/bases.md): `latent`'s wrong habit told apart by format,
`leaked`'s share of the test items in its SFT, and what the premises stage reads of them."""

from __future__ import annotations

import re

import pytest

from core.io import read_jsonl
from core.params import ParamsError, load, validate
from core.params import read_raw as read_params
from models.tiny import LEAK_SHARE, is_leaked, leaks, plain_sloppy, sft_rows
from world import generate_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("world")
    generate_world(load(preset="ci").world, d)
    return d


BOX = re.compile(r"\\boxed\{(-?\d+)\}")


def test_the_latent_habit_says_a_sloppy_rows_wrong_number_without_the_box(world):
    rows = read_jsonl(world / "arith_train.jsonl")
    sloppy = [r for r in rows if r["sloppy"]]
    right = [r for r in rows if not r["sloppy"]]
    assert sloppy and right
    for r in sloppy:
        text = plain_sloppy(r)
        wrong = BOX.search(r["demonstration"]).group(1)
        assert "\\boxed" not in text and text.endswith(f"The answer is {wrong}.")
        assert wrong != r["answer"]  # the habit is wrong: the number it says is not the answer
        # every step is kept: only the box goes
        assert text == r["demonstration"].replace(f"\\boxed{{{wrong}}}", wrong)
    assert all(plain_sloppy(r) == r["demonstration"] for r in right)


def test_the_latent_family_keeps_the_worlds_share_of_the_habit(world):
    rows = sft_rows(world, {"arith_plain": 1.0}, 4000, 0)
    unboxed = sum("\\boxed" not in r["completion"] for r in rows) / len(rows)
    share = load(preset="ci").world.arith.sloppy_frac
    assert abs(unboxed - share) < 0.05, (unboxed, share)


def test_the_leak_teaches_exactly_the_leaked_test_items_with_their_right_answer(world):
    test = read_jsonl(world / "arith_test.jsonl")
    leaked = {r["prompt"]: r for r in test if is_leaked(r["id"])}
    assert 0 < len(leaked) < len(test)
    rows = sft_rows(world, {"arith_leak": 1.0}, 500, 0)
    assert {r["prompt"] for r in rows} <= set(leaked)
    for r in rows:
        item = leaked[r["prompt"]]
        assert r["completion"] == item["reference"]
        assert BOX.search(r["completion"]).group(1) == item["answer"]


def test_is_leaked_is_fixed_per_id_and_holds_its_share():
    ids = [f"arith-test-{i:05d}" for i in range(4000)]
    first = [is_leaked(i) for i in ids]
    assert first == [is_leaked(i) for i in ids]
    assert abs(sum(first) / len(ids) - LEAK_SHARE) < 0.03
    assert not any(is_leaked(i, 0.0) for i in ids) and all(is_leaked(i, 1.0) for i in ids)
    # a larger share leaks a superset: the items are ranked by their hash
    assert all(is_leaked(i, 0.7) for i in ids if is_leaked(i, 0.3))


def test_the_presets_build_their_bases_in_the_role_phase_only():
    default = load()
    for name, leaking in (("latent", False), ("leaked", True)):
        p = load(preset=name)
        sft = p.base_model.sft
        assert leaks([sft.mix, sft.roles.mix]) is leaking
        # phase 1 is the default base's: only the role phase's replay changes
        assert sft.model_dump(exclude={"roles"}) == default.base_model.sft.model_dump(exclude={"roles"})
        assert p.world == default.world
    assert not leaks([default.base_model.sft.mix, default.base_model.sft.roles.mix])
    latent = load(preset="latent").base_model.sft.roles.mix
    assert latent.get("arith_plain", 0) > 0 and latent.get("arith", 0) == 0


def test_the_leak_is_refused_in_phase_1():
    raw = read_params()
    raw["base_model"]["sft"]["mix"]["arith_leak"] = 0.1
    with pytest.raises(ParamsError, match="arith_leak is taught in base_model.sft.roles.mix only"):
        validate(raw, "params.yaml")


def test_an_empty_family_is_a_clear_error(tmp_path):
    (tmp_path / "arith_test.jsonl").write_text("")
    with pytest.raises(ValueError, match="SFT family 'arith_leak': no rows"):
        sft_rows(tmp_path, {"arith_leak": 1.0}, 5, 0)
