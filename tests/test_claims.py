"""The claims table (evals/claims.py): verdicts from synthetic per-item files, the seed rule, the
bootstrap's determinism and pairing, bad per-item files, and the report's claims section."""

from __future__ import annotations

import html
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.io import DataError
from core.params import load
from evals import claims as cl
from evals import stats
from evals.items import item_scores
from evals.registry import BENCHMARKS
from flows import report as rep
from flows.report_collect import collect

KEY = "arith/pass@1"


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def write_run(data: Path, method: str, seed: int, scores, items: bool = True, order=None) -> None:
    """One evaluated run: metrics.json with the pooled score, items.json with each item's
    (ids `arith-test-<i>`, written in `order` if given)."""
    scores = [float(x) for x in scores]
    write(data / "eval" / method / f"seed{seed}" / "metrics.json", {KEY: float(np.mean(scores))})
    if items:
        order = list(range(len(scores))) if order is None else list(order)
        write(data / "eval" / method / f"seed{seed}" / "items.json",
              {"arith": {"headline": "pass@1", "ids": [f"arith-test-{i:05d}" for i in order],
                         "metrics": {"pass@1": [scores[i] for i in order], "pass@k": [1.0] * len(order)}}})


def write_base(data: Path, scores: np.ndarray) -> None:
    """The base's evaluation: per-item arith pass@1 `scores` and their mean."""
    write(data / "eval" / "base" / "metrics.json", {KEY: float(scores.mean())})
    write(data / "eval" / "base" / "items.json", {"arith": {
        "headline": "pass@1", "ids": [f"arith-test-{i:05d}" for i in range(len(scores))],
        "metrics": {"pass@1": [float(x) for x in scores]}}})


def write_cf(folder: Path, cheat: float, accuracy: float | None = None, items: int = 40) -> None:
    """One evaluation of the hint_copier kind (folder: eval/<arm>/seed<s>, or eval/base): per-item
    arith_cf cheat rate (and pass@1) around `cheat` (`accuracy`), the same item offsets in every
    run (so paired differences are exact), and their means in metrics.json. Per item, as the
    records have it: a per-run number against a base evaluated once is refused (one draw)."""
    offsets = 0.005 * (np.arange(items) % 3 - 1)
    metrics = {"cheat_rate": (cheat + offsets).tolist()}
    if accuracy is not None:
        metrics["pass@1"] = (accuracy + offsets).tolist()
    write(folder / "items.json", {"arith_cf": {"headline": "cheat_rate", "metrics": metrics,
                                               "ids": [f"arith_cf-test-{i:05d}" for i in range(items)]}})
    write(folder / "metrics.json", {f"arith_cf/{k}": float(np.mean(v)) for k, v in metrics.items()})


def arms(data: Path, treatment: np.ndarray, control: np.ndarray, **kw) -> None:
    """Arms `t` and `c`, one run per row of the (seeds, items) arrays."""
    for name, table in (("t", treatment), ("c", control)):
        for seed, row in enumerate(table):
            write_run(data, name, seed, row, **kw)


def claim(kind="greater", **kw) -> cl.Claim:
    return cl.Claim("x", "000", "Fig. 0", "t beats c", (("t", "c"),), KEY, kind, **kw)


def judge(data: Path, *claims: cl.Claim, **kw) -> tuple[list[cl.Verdict], list[str]]:
    """The claims decided on the runs under `data`, one base: the family rule across bases
    (evals/claims.yaml `family: bases: agree`) would make every verdict here inconclusive for
    want of a second base, so these tests read the one base's verdict (`second=None`); the
    rule's own tests pass the second base."""
    kw.setdefault("second", None)
    return cl.verdicts(collect(data).runs, claims or (claim(min_effect=0.1),), **kw)


def own(v: cl.Verdict) -> str:
    """The first base's own verdict (the headline, `v.verdict`, is the family rule's across the
    bases: where the second base differs it keeps the first base's in `v.first`)."""
    return v.first.get("verdict", v.verdict)


def items_world(n_items=60, seeds=3, shift=0.3, noise=0.05, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """Per-item scores: item difficulty shared by both arms, treatment `shift` above control."""
    rng = np.random.default_rng(seed)
    ease = rng.uniform(0.1, 0.6, n_items)
    c = np.clip(ease + rng.normal(0, noise, (seeds, n_items)), 0, 1)
    t = np.clip(ease + shift + rng.normal(0, noise, (seeds, n_items)), 0, 1)
    return t, c


# ------------------------------------------------------------------------------ worked examples

def test_an_obvious_gain_is_reproduced_from_paired_items(tmp_path) -> None:
    t, c = items_world(shift=0.3)
    arms(tmp_path, t, c)
    [v], notes = judge(tmp_path)
    [x] = v.comparisons
    assert v.verdict == cl.REPRODUCED and not notes
    assert x.difference == pytest.approx(t.mean() - c.mean())
    assert 0.2 < x.low < x.difference < x.high < 0.4
    assert x.seeds == {"t": 3, "c": 3} and x.basis == "60 items paired by id × seeds"


def test_no_gain_is_not_reproduced(tmp_path) -> None:
    t, c = items_world(shift=0.0)
    arms(tmp_path, t, c)
    [v], _ = judge(tmp_path)
    assert v.verdict == cl.NOT_REPRODUCED and v.comparisons[0].high < 0.1
    assert v.reason == "the interval excludes +0.10"


def test_a_noisy_small_difference_is_inconclusive(tmp_path) -> None:
    c = np.array([[0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1]])
    t = np.array([[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 1, 1]])
    arms(tmp_path, t, c)
    [v], _ = judge(tmp_path)
    x = v.comparisons[0]
    # The pilot is too noisy to decide: the power rule plans the cap, and no interval is
    # computed before those seeds exist (a verdict is computed once, on the planned seeds).
    assert v.verdict == cl.INCONCLUSIVE and x.difference is None and x.plan["seeds"] == cl.MAX_SEEDS
    # The cap is planned because nothing up to it reaches the rule's power, and the reader is
    # told so before the 14 runs are spent, not only after.
    assert x.plan["beyond"].startswith("more than the cap of 10 seeds per arm") and x.plan["power"] < 0.8
    assert v.reason == ("10 seeds per arm needed (the power rule, from the pilot; "
                        f"the cap, where its power is {x.plan['power']:.0%})")
    assert v.needs.startswith("10 seeds per arm (t has 3, c has 3), 14 more runs")
    assert v.needs.endswith("; the power rule wants " + x.plan["beyond"])
    # With the planned seeds on disk the interval is computed, and it includes 0.
    rng = np.random.default_rng(3)
    arms(tmp_path, np.vstack([t, rng.integers(0, 2, (7, 4))]), np.vstack([c, rng.integers(0, 2, (7, 4))]))
    [v], _ = judge(tmp_path)
    x = v.comparisons[0]
    assert v.verdict == cl.INCONCLUSIVE and x.low < 0 < 0.1 < x.high
    # The cap, not the power rule, set these 10 seeds: the reason says so.
    assert v.reason == "the interval includes 0 at the declared cap of 10 seeds per arm"


def test_within_and_less(tmp_path) -> None:
    # +0.04, 95% interval about [0.03, 0.05]. Ten seeds: the ±0.01 margin is planned from the
    # declared margin (9 seeds to show "inside ±0.01" with 80% power at a truth of 0), no
    # longer from the pilot's +0.04, which once planned it 3.
    t, c = items_world(shift=0.04, seeds=10)
    arms(tmp_path, t, c)
    tracks = claim("within", margin=0.1)
    apart = claim("within", margin=0.01)
    edge = claim("within", margin=0.04)
    lower = claim("less", min_effect=0.05)
    found = judge(tmp_path, tracks, apart, edge, lower)[0]
    assert [v.verdict for v in found] == [
        cl.REPRODUCED,                                  # inside ±0.10
        cl.NOT_REPRODUCED,                              # wholly above +0.01
        cl.INCONCLUSIVE,                                # straddles +0.04
        cl.NOT_REPRODUCED]                              # t is not below c at all
    # Undecided, but off 0: the reason says on which side, by rule.
    assert found[2].reason == ("t above c (the interval excludes 0); the ±0.04 margin undecided at "
                               "the planned 3 seeds per arm")
    assert found[1].comparisons[0].plan["seeds"] == 9


def test_decide_mirrors_less_and_needs_the_effect() -> None:
    less = claim("less", min_effect=0.05)
    assert cl.decide(less, -0.10, -0.14, -0.06)[0] == cl.REPRODUCED
    assert cl.decide(less, -0.02, -0.04, 0.01)[0] == cl.NOT_REPRODUCED
    # the interval is below 0 but the difference is short of the expected size: not a verdict
    assert cl.decide(less, -0.03, -0.06, -0.01) == (cl.INCONCLUSIVE,
                                                    "interval below 0 but the difference is short of −0.05")
    within = claim("within", margin=0.1)
    assert cl.decide(within, 0.0, -0.12, 0.05)[0] == cl.INCONCLUSIVE


def test_an_arm_with_two_seeds_is_inconclusive_naming_it(tmp_path) -> None:
    t, c = items_world(shift=0.3)
    arms(tmp_path, t, c[:2])
    [v], _ = judge(tmp_path)
    assert v.verdict == cl.INCONCLUSIVE and v.reason == "arm c: 2 seeds of the 3 pilot seeds"
    assert v.comparisons[0].difference is None  # no number from fewer seeds


def test_a_claim_holds_only_when_each_comparison_does(tmp_path) -> None:
    t, c = items_world(shift=0.3)
    arms(tmp_path, t, c)
    both = cl.Claim("y", "003", "Table 1", "s", (("t", "c"), ("c", "t")), KEY, "greater", min_effect=0.1)
    [v], _ = judge(tmp_path, both)
    assert [x.verdict for x in v.comparisons] == [cl.REPRODUCED, cl.NOT_REPRODUCED]
    assert v.verdict == cl.NOT_REPRODUCED and v.reason.startswith("c vs t: ")
    missing = cl.Claim("z", "003", "Table 1", "s", (("t", "c"), ("u", "t")), KEY, "greater", min_effect=0.1)
    [v], _ = judge(tmp_path, missing)
    assert v.verdict == cl.INCONCLUSIVE and v.reason == "u vs t: arm u: 0 seeds of the 3 pilot seeds"


def test_a_blocked_claim_is_inconclusive_whatever_the_runs(tmp_path) -> None:
    t, c = items_world(shift=0.3)
    arms(tmp_path, t, c)
    [v], _ = judge(tmp_path, claim(min_effect=0.1, blocked="simulation only"))
    assert v.verdict == cl.INCONCLUSIVE and v.reason == "simulation only"
    assert v.comparisons[0].seeds == {"t": 3, "c": 3} and v.comparisons[0].difference is None


# ------------------------------------------------------------------------------ the bootstrap

def test_the_bootstrap_is_deterministic_and_uses_its_seed(tmp_path) -> None:
    t, c = items_world(shift=0.1, noise=0.2)
    arms(tmp_path, t, c)
    first = [v.as_json() for v in judge(tmp_path)[0]]
    assert first == [v.as_json() for v in judge(tmp_path)[0]]
    assert cl.paired_bootstrap(t, c) == cl.paired_bootstrap(t, c)
    assert cl.paired_bootstrap(t, c, seed=1)[1:] != cl.paired_bootstrap(t, c)[1:]


def test_both_arms_draw_the_same_items() -> None:
    # Items differ wildly in difficulty, but treatment is control + 0.1 on every item and seed:
    # paired draws see exactly +0.1 every time; independent draws would see the items' spread.
    control = np.tile(np.linspace(0.0, 0.8, 50), (3, 1))
    diff, low, high = cl.paired_bootstrap(control + 0.1, control)
    assert diff == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1)


def test_items_are_paired_by_id_not_by_position(tmp_path) -> None:
    t, c = items_world(shift=0.1, noise=0.2)
    arms(tmp_path / "a", t, c)
    reversed_order = range(t.shape[1] - 1, -1, -1)
    arms(tmp_path / "b", t, c, order=reversed_order)      # the same scores, ids written backwards
    for m, seed in (("t", 0), ("c", 2)):                  # and two runs shuffled differently
        write_run(tmp_path / "b", m, seed, (t if m == "t" else c)[seed],
                  order=np.random.default_rng(seed).permutation(t.shape[1]))
    a, b = (judge(tmp_path / d)[0][0].comparisons[0] for d in ("a", "b"))
    assert (a.difference, a.low, a.high) == (b.difference, b.low, b.high)


def test_only_items_every_run_scored_are_paired(tmp_path) -> None:
    t, c = items_world(n_items=40, shift=0.3)
    arms(tmp_path, t, c)
    write_run(tmp_path, "c", 1, c[1, :30])  # this run scored the first 30 items only
    x = judge(tmp_path)[0][0].comparisons[0]
    assert x.basis == "30 items paired by id × seeds (common to every run; up to 40 per run)"
    assert x.difference == pytest.approx(
        np.mean([t[:, :30].mean(axis=1).mean()]) - np.mean([c[:, :30].mean(axis=1).mean()]))


# ------------------------------------------------------------------------------ bad or missing files

def test_missing_items_fall_back_to_seeds_and_say_so(tmp_path) -> None:
    t, c = items_world(shift=0.3, seeds=5)
    arms(tmp_path, t, c)
    (tmp_path / "eval" / "c" / "seed1" / "items.json").unlink()
    [v], notes = judge(tmp_path)
    x = v.comparisons[0]
    assert x.basis == "seeds only (no per-item scores in 1 of 10 runs)" and not notes
    assert x.test == "Welch t-interval" and x.p is not None
    assert x.seeds == {"t": 5, "c": 5} and x.difference == pytest.approx(t.mean() - c.mean())
    # One number per run: never decided from 3 seeds, whatever the gap.
    for seed in (3, 4):
        for arm in ("t", "c"):
            for f in (tmp_path / "eval" / arm / f"seed{seed}").iterdir():
                f.unlink()
    [v], _ = judge(tmp_path)
    assert v.verdict == cl.INCONCLUSIVE and v.reason.startswith("5 seeds per arm needed")


def test_malformed_items_are_a_one_line_note_and_a_counted_skip(tmp_path) -> None:
    t, c = items_world(shift=0.3, seeds=5)
    arms(tmp_path, t, c)
    bad = tmp_path / "eval" / "t" / "seed2" / "items.json"
    entry = json.loads(bad.read_text())
    entry["arith"]["metrics"]["pass@1"].pop()                    # one value short
    bad.write_text(json.dumps(entry))
    (tmp_path / "eval" / "c" / "seed0" / "items.json").write_text("{not json")  # truncated
    collected = collect(tmp_path)
    [v], notes = cl.verdicts(collected.runs, [claim(min_effect=0.1)], second=None)  # one base (`judge`)
    assert notes == ["data/eval/t/seed2/items.json: arith/pass@1: expected a list of 60 values (one per "
                     "id), got 59; skipped, its comparisons use seeds only"]
    assert any("c/seed0/items.json: unreadable" in n for n in collected.notes)
    assert v.comparisons[0].basis == "seeds only (no per-item scores in 2 of 10 runs)"
    assert v.verdict == cl.REPRODUCED  # still decided, from the seeds


@pytest.mark.parametrize("items, fault", [
    ([], "expected a JSON object of benchmarks"),
    ({"arith": {"ids": ["a", "a"], "metrics": {"pass@1": [1, 0]}}}, "duplicate row ids"),
    ({"arith": {"ids": ["a"], "metrics": {"pass@1": ["high"]}}}, "row 'a' has 'high', not a finite number"),
    ({"arith": "nope"}, "arith: expected"),
])
def test_item_scores_faults_are_named(items, fault) -> None:
    with pytest.raises(DataError, match="^where: .*" + fault.replace("(", r"\(")):
        item_scores(items, KEY, "where")


def test_a_run_without_the_benchmark_has_no_item_scores() -> None:
    assert item_scores({"facts": {"ids": [], "metrics": {}}}, KEY, "w") is None
    assert item_scores({"arith": {"ids": ["a", "b"], "metrics": {"pass@1": [1.0, None]}}}, KEY, "w") == {"a": 1.0}


# ------------------------------------------------------------------------------ curve measures

def test_curve_measures_are_per_run_numbers_over_seeds(tmp_path) -> None:
    for seed in range(5):
        write(tmp_path / "plots" / "t" / f"seed{seed}" / "heldout.json",
              [{"step": 0, KEY: 0.3}, {"step": 25, KEY: 0.6 + 0.01 * seed}, {"step": 50, KEY: 0.58}])
        write(tmp_path / "plots" / "c" / f"seed{seed}" / "heldout.json",
              [{"step": 50, KEY: 0.05}, {"step": 0, KEY: 0.3}, {"step": 25, KEY: 0.5}])  # unsorted
        write(tmp_path / "plots" / "t" / f"seed{seed}" / "train.json",
              [{"step": s, "rlcer/corr_mean": 0.2 + 0.1 * s} for s in range(1, 9)])
        write(tmp_path / "plots" / "c" / f"seed{seed}" / "train.json",
              [{"step": s, "rlcer/corr_mean": 0.5} for s in range(1, 9)])
    drop = cl.Claim("d", "000", "Fig. 5", "s", (("t", "c"),), KEY, "less", min_effect=0.05,
                    measure="heldout_drop")
    change = cl.Claim("e", "004", "Fig. 6a", "s", (("t", "c"),), "rlcer/corr_mean", "greater",
                      min_effect=0.05, measure="train_change")
    v_drop, v_change = judge(tmp_path, drop, change)[0]
    # t drops 0.02-0.04 from its best, c 0.45: the difference is about −0.42
    assert v_drop.comparisons[0].difference == pytest.approx(np.mean([0.02, 0.03, 0.04, 0.05, 0.06]) - 0.45)
    assert v_drop.verdict == cl.REPRODUCED
    assert v_drop.comparisons[0].basis == "seeds only (the held-out drop is one number per run)"
    assert v_drop.comparisons[0].test == "Welch t-interval"
    # 5 against 5, every treatment value below every control value: the exact one-sided p is
    # 1 of the 252 relabellings.
    assert v_drop.comparisons[0].p == pytest.approx(1 / 252, abs=1e-4)
    # last quarter (steps 7, 8) minus first quarter (1, 2): +0.6 for t, 0 for c
    assert v_change.comparisons[0].difference == pytest.approx(0.6) and v_change.verdict == cl.REPRODUCED
    # The verdict's numbers seed by seed, beside the mean: how many runs show the effect.
    assert v_drop.comparisons[0].values == {"t": {0: 0.02, 1: 0.03, 2: 0.04, 3: 0.05, 4: 0.06},
                                            "c": dict.fromkeys(range(5), 0.45)}
    assert cl.per_seed(v_drop.comparisons[0]) == ("t: per seed +0.020 +0.030 +0.040 +0.050 +0.060; "
                                                  "c: per seed +0.450 +0.450 +0.450 +0.450 +0.450")
    alone = cl.compare(collect(tmp_path).runs, change, "t", None, [])
    assert cl.per_seed(alone) == "per seed +0.600 +0.600 +0.600 +0.600 +0.600; 5 of 5 above 0"
    assert json.loads(json.dumps(cl._comparison_json(alone)))["values"]["t"]["4"] == 0.6


def test_a_per_run_plan_sizes_the_t_interval_it_is_decided_by(tmp_path) -> None:
    """A per-run measure is decided by a t-interval, so its plan uses t quantiles: for a declared
    effect of 0.55 and this pilot's spread (sd 0.387 over 3 seeds) a normal approximation plans
    5 seeds, at which the t-interval cannot decide; the rule plans 7, and there it is decided.
    (The claim declares its effect: the plan never reads the pilot's difference, here also
    −0.55 from the bound, which is how this test once set it.)"""
    def curve(data: Path, arm: str, seed: int, change: float) -> None:
        write(data / "plots" / arm / f"seed{seed}" / "train.json",
              [{"step": s, "m": 0.5 + (change if s > 6 else 0.0)} for s in range(1, 9)])

    changes = [-0.55 - 0.387, -0.55, -0.55 + 0.387, -0.6, -0.5, -0.55, -0.6]
    change = cl.Claim("e", "004", "Fig. 6a", "s", (("t", "c"),), "m", "greater", measure="train_change",
                      min_effect=0.55)
    for seed, value in enumerate(changes[:5]):
        curve(tmp_path, "t", seed, value)
        curve(tmp_path, "c", seed, 0.0)
    [v], _ = judge(tmp_path, change)
    x = v.comparisons[0]
    assert x.plan["seeds"] == 7 and v.verdict == cl.INCONCLUSIVE and x.difference is None
    assert v.reason == "7 seeds per arm needed (the power rule, from the pilot)"
    for seed, value in enumerate(changes[5:], start=5):
        curve(tmp_path, "t", seed, value)
        curve(tmp_path, "c", seed, 0.0)
    [v], _ = judge(tmp_path, change)
    x = v.comparisons[0]
    assert v.verdict == cl.NOT_REPRODUCED and x.high < 0 and x.test == "Welch t-interval"


def test_rise_then_fall_reads_the_test_curve_and_needs_both_halves(tmp_path) -> None:
    """`test_rise_fall` is min(peak − first, peak − last) of test.json (never the held-out curve
    the alarms read): a run that rose then collapsed scores its smaller half; one that only fell
    (never improved) or kept its gain scores about 0, so neither counts as the papers' shape."""
    courses = {"t": [0.3, 0.6, 0.45, 0.35],     # rose 0.30, fell 0.25: 0.25
               "c": [0.3, 0.25, 0.1, 0.05]}     # only fell: 0 (the peak is the base)
    for arm, curve in courses.items():
        for seed in range(5):
            write(tmp_path / "plots" / arm / f"seed{seed}" / "test.json",
                  [{"step": 25 * i, KEY: v + 0.001 * seed} for i, v in enumerate(curve)])
            # a held-out curve that would say otherwise: it is not read
            write(tmp_path / "plots" / arm / f"seed{seed}" / "heldout.json",
                  [{"step": 0, KEY: 0.9}, {"step": 25, KEY: 0.0}])
    c = cl.Claim("r", "x", "Fig. 1", "s", (("t", "c"),), KEY, "greater", min_effect=0.10,
                 measure="test_rise_fall")
    (v,), _ = judge(tmp_path, c)
    assert v.comparisons[0].difference == pytest.approx(0.25)
    assert v.verdict == cl.REPRODUCED
    assert v.comparisons[0].basis.startswith("seeds only (the rise")
    kept = cl.Claim("k", "x", "Fig. 1", "s", (("c", None),), KEY, "greater", min_effect=0.10,
                    measure="test_rise_fall")
    (v,), _ = judge(tmp_path, kept)
    assert v.comparisons[0].difference == pytest.approx(0.0)
    assert v.verdict == cl.NOT_REPRODUCED



def test_a_per_run_pilot_beyond_the_cap_names_seeds_not_items(tmp_path) -> None:
    """Unanchored long RLME's pilot on the weak evaluator (its train reward's change, seeds
    0-2: +0.134, +0.221, -0.013): too spread for 10 seeds to decide an effect of 0.114; a
    per-run number has no items, so what it needs never says "more items". The effect is the
    claim's DECLARED min_effect (here set to the pilot's mean, which is how this test once came
    by it: the plan now reads only what is declared, so a claim declares it)."""
    for seed, change in enumerate([0.134, 0.221, -0.013]):
        write(tmp_path / "plots" / "t" / f"seed{seed}" / "train.json",
              [{"step": s, "reward": -0.8 + (change if s > 6 else 0.0)} for s in range(1, 9)])
    rises = cl.Claim("h", "000", "Fig. 5", "s", (("t", None),), "reward", "greater", measure="train_change",
                     min_effect=0.1139)
    (v,), _ = judge(tmp_path, rises)
    x = v.comparisons[0]
    assert x.plan["seeds"] == 10 and x.plan["beyond"] == (
        "more than the cap of 10 seeds per arm (the declared effect is 0.114; "
        "at the cap its power is 77%; 80% needs 11 seeds per arm)")
    # 77%: the t distribution at 9 degrees of freedom (evals.stats.power_at); the rule wants 80%.
    assert x.plan["power"] == 0.77
    # The 11 is the rule's own plan under a cap of 11: declared before the runs, that cap would
    # plan exactly these seeds, and one fewer would fall short of 80%.
    assert x.plan["power_seeds"] == 11
    raised = cl.Claim("h", "000", "Fig. 5", "s", (("t", None),), "reward", "greater", measure="train_change",
                      min_effect=0.1139, max_seeds=11)
    (w,), _ = judge(tmp_path, raised)
    assert w.comparisons[0].plan["seeds"] == 11 and "beyond" not in w.comparisons[0].plan
    assert stats.power_at(0.1139, 0.014076, 11, arm_vars=[0.014076]) >= 0.8
    assert stats.power_at(0.1139, 0.014076, 10, arm_vars=[0.014076]) < 0.8
    assert cl.per_seed(x) == "per seed +0.134 +0.221 -0.013; 2 of 3 above 0"
    # Nothing declared (min_effect 0, "the reward rises"): nothing to plan from but the cap.
    bare = cl.Claim("h", "000", "Fig. 5", "s", (("t", None),), "reward", "greater", measure="train_change")
    (u,), _ = judge(tmp_path, bare)
    assert u.comparisons[0].plan["seeds"] == 10 and u.comparisons[0].plan["power"] is None
    assert u.reason == ("10 seeds per arm needed (the power rule, from the pilot; the cap: no declared "
                        "effect to plan from)")


@pytest.mark.parametrize("gap, seed_var, item_var, arm_vars", [
    (0.1, 0.01, 0.0, None),                 # per item, seeds alone
    (0.05, 0.002, 0.02, None),              # per item, items too
    (0.05, 0.002, 0.2, None),               # per item, more items than 200 needed at the cap
    (0.3, 0.05, 0.0, [0.03, 0.02]),         # per run, Welch
    (0.5506, 0.1136, 0.0, [0.1136]),        # per run, one sample (the docstring's example)
])
def test_the_power_at_the_planned_seeds_is_the_rules_eighty_percent(gap, seed_var, item_var, arm_vars) -> None:
    """power_at reads the power rule backwards: at the seeds seeds_needed plans the power is at
    least 80%, one seed fewer it is below (else the plan would have stopped there)."""
    n, m = stats.seeds_needed(gap, seed_var, item_var, 200, cap=20, minimum=2, arm_vars=arm_vars)
    items = m or 200
    assert n is not None and n > 2
    assert stats.power_at(gap, seed_var, n, item_var, items, arm_vars) >= 0.8 - 1e-9
    if m is None:
        assert stats.power_at(gap, seed_var, n - 1, item_var, items, arm_vars) < 0.8
    else:  # at the cap: one item fewer falls short, and today's 200 items fall short too
        assert stats.power_at(gap, seed_var, n, item_var, items - 1, arm_vars) < 0.8
        assert stats.power_at(gap, seed_var, n, item_var, 200, arm_vars) < 0.8
    assert stats.power_at(0.0, seed_var, n, item_var, items, arm_vars) == 0.0   # no gap: no decision


# ------------------------------------------------------------------------------ issue 68's rules

def test_a_per_item_comparison_is_decided_by_the_seed_level_t_interval(tmp_path) -> None:
    """The verdict's interval is `evals.stats.seed_item_t` on the planned seeds (the seed level's
    degrees of freedom, the items folded in), not the percentile bootstrap, which at 3 seeds
    resamples the seeds it should be uncertain about."""
    t, c = items_world(shift=0.3)
    t = t + np.array([[0.0], [0.03], [-0.03]])  # the seeds disagree: the seed level matters
    arms(tmp_path, t, c)
    [v], _ = judge(tmp_path)
    x = v.comparisons[0]
    e = stats.seed_item_t(t, c)
    assert x.test == cl.TEST_ITEMS and (x.difference, x.low, x.high) == (e.difference, e.low, e.high)
    assert x.df == e.df and x.df < 6            # about the seeds' 4, not the items' 100s
    boot = cl.paired_bootstrap(t, c)
    assert x.high - x.low > boot[2] - boot[1]   # wider than the bootstrap's, as it must be here


def test_the_bootstrap_decides_only_at_many_seeds(tmp_path) -> None:
    """`BOOTSTRAP_MIN_SEEDS` seeds per arm planned (a cap that high, an effect that small): the
    percentile bootstrap is sound there, and it decides, with its resamples and seed."""
    n = stats.BOOTSTRAP_MIN_SEEDS
    t, c = items_world(shift=0.3, seeds=n, n_items=30)
    arms(tmp_path, t, c)
    [v], _ = judge(tmp_path, claim(min_effect=0.001, max_seeds=n))
    x = v.comparisons[0]
    assert x.plan["seeds"] == n and x.test == "paired bootstrap" and v.verdict == cl.REPRODUCED
    assert (x.difference, x.low, x.high) == cl.paired_bootstrap(t, c)


def test_a_per_run_number_against_a_base_evaluated_once_is_refused(tmp_path) -> None:
    """One number per run against one draw of the base: nothing measures that draw's noise (per
    item, the items do), so the comparison is undecided and says what would decide it."""
    for seed in range(5):
        write(tmp_path / "eval" / "t" / f"seed{seed}" / "metrics.json", {KEY: 0.6 + 0.01 * seed})
    write(tmp_path / "eval" / "base" / "metrics.json", {KEY: 0.3})
    [v], _ = judge(tmp_path, cl.Claim("x", "0", "F", "s", (("t", "base"),), KEY, "greater", min_effect=0.1))
    assert v.verdict == cl.INCONCLUSIVE and v.comparisons[0].difference is None
    assert v.reason.startswith("a per-run number against the base evaluated once")


def test_a_per_run_number_against_the_bases_draws_is_decided(tmp_path) -> None:
    """The same comparison once the base has further sampling draws (params base_draws,
    data/eval/base/draw<d>/): their spread is measured, so the per-run test decides, and the base
    counts every draw."""
    for seed in range(5):
        write(tmp_path / "eval" / "t" / f"seed{seed}" / "metrics.json", {KEY: 0.6 + 0.01 * seed})
    write(tmp_path / "eval" / "base" / "metrics.json", {KEY: 0.3})
    for d in (1, 2, 3, 4):
        write(tmp_path / "eval" / "base" / f"draw{d}" / "metrics.json", {KEY: 0.3 + 0.005 * (d % 2)})
    [v], _ = judge(tmp_path, cl.Claim("x", "0", "F", "s", (("t", "base"),), KEY, "greater", min_effect=0.1))
    x = v.comparisons[0]
    assert x.seeds == {"t": 5, "base": 5} and v.verdict == cl.REPRODUCED
    assert x.values["base"] == {0: 0.3, 1: 0.305, 2: 0.3, 3: 0.305, 4: 0.3}


def test_the_bases_draws_enter_a_per_item_comparison_as_its_seeds(tmp_path) -> None:
    """Per item, the base's draws are its rows: the t-interval is `seed_item_t` on the arm's
    seeds against every draw of the base, not against its first evaluation alone."""
    t, c = items_world(shift=0.2, seeds=3)
    draws, _ = items_world(shift=0.0, seeds=3, seed=1)
    for seed, row in enumerate(t):
        write_run(tmp_path, "t", seed, row)
    write_base(tmp_path, c[0])
    for d, row in enumerate([c[1], c[2]], start=1):
        folder = tmp_path / "eval" / "base" / f"draw{d}"
        write(folder / "metrics.json", {KEY: float(row.mean())})
        write(folder / "items.json", {"arith": {
            "headline": "pass@1", "ids": [f"arith-test-{i:05d}" for i in range(len(row))],
            "metrics": {"pass@1": [float(x) for x in row]}}})
    [v], _ = judge(tmp_path, cl.Claim("x", "0", "F", "s", (("t", "base"),), KEY, "greater", min_effect=0.1))
    x = v.comparisons[0]
    assert x.seeds == {"t": 3, "base": 3}
    e = cl.seed_item_t(t, c)
    assert (x.difference, x.low, x.high) == (e.difference, e.low, e.high)


def test_a_per_run_precondition_is_decided_at_five_seeds_not_three(tmp_path) -> None:
    """Per-run preconditions follow the per-run rule (at least MIN_SEEDS_PER_RUN seeds): three
    seeds of a clearly rising curve leave the precondition undecided, with the seeds it needs;
    at five it holds (before issue 68 it held at the pilot's three)."""
    def curve(seed: int, rise: float) -> None:
        write(tmp_path / "plots" / "p" / f"seed{seed}" / "train.json",
              [{"step": s, "reward": 0.1 + (rise if s > 6 else 0.0)} for s in range(1, 9)])

    for seed, rise in enumerate([0.30, 0.32, 0.31]):
        curve(seed, rise)
    t, c = items_world(shift=0.3)
    arms(tmp_path, t, c)
    gated = claim(min_effect=0.1, preconditions=(cl.Precondition(
        "p's reward rises", "p", None, "reward", measure="train_change", min_effect=0.05),))
    [v], _ = judge(tmp_path, gated)
    assert v.preconditions[0].status == cl.UNDECIDED and v.verdict == cl.INCONCLUSIVE
    assert v.preconditions[0].comparison.plan["seeds"] == cl.MIN_SEEDS_PER_RUN
    assert f"{cl.MIN_SEEDS_PER_RUN} seeds per arm needed" in v.preconditions[0].detail
    for seed, rise in enumerate([0.29, 0.33], start=3):
        curve(seed, rise)
    [v], _ = judge(tmp_path, gated)
    assert v.preconditions[0].status == cl.HOLDS and v.verdict == cl.REPRODUCED


def test_a_comparison_that_cannot_reach_its_effect_on_its_base_is_not_tested(tmp_path) -> None:
    """r3_resists_dilution's kind: a row's gap R3 − average probability is at most 1 − the
    average probability's correlation there. Where that bound, over the items, is below
    min_effect, no R3 could reproduce the claim on this base: not tested, by the declared
    `bound`, with the bound's number; where the bound leaves room, the claim is decided."""
    def base(corr: float, gap: float) -> None:
        n = 80
        ids = [f"arith_ref-test-{i:05d}" for i in range(n)]
        rows = {"avg_prob_corr": [corr] * n, "dilution_gap": [gap + 0.001 * (i % 5 - 2) for i in range(n)]}
        write(tmp_path / "eval" / "base" / "items.json",
              {"arith_ref": {"headline": "pass@1", "ids": ids, "metrics": rows}})
        write(tmp_path / "eval" / "base" / "metrics.json",
              {f"arith_ref/{k}": float(np.mean(v)) for k, v in rows.items()})

    dilution = cl.Claim("r", "003", "Fig. 3", "s", ({"treatment": "base", "control": None,
                                                     "bound": "1 - arith_ref/avg_prob_corr"},),
                        "arith_ref/dilution_gap", "greater", min_effect=0.05)
    base(0.96, 0.003)                              # at most 1 - 0.96 = 0.04 < 0.05
    [v], _ = judge(tmp_path, dilution)
    assert v.verdict == cl.NOT_TESTED and v.comparisons[0].verdict == cl.NOT_TESTED
    assert v.reason == ("the test cannot succeed on this base: the difference can reach at most +0.040 "
                        "(1 - arith_ref/avg_prob_corr, mean over 80 items), short of +0.05")
    base(0.80, 0.003)                              # room to reach 0.05: tested, and it does not
    [v], _ = judge(tmp_path, dilution)
    assert v.verdict == cl.NOT_REPRODUCED and v.comparisons[0].df == 79.0  # the items' alone
    with pytest.raises(ValueError, match="bound"):
        cl.Claim("w", "0", "F", "s", ({"treatment": "a", "control": "b", "bound": "1 -"},), KEY, "greater")
    with pytest.raises(ValueError, match="a `bound` caps"):
        cl.Claim("w", "0", "F", "s", ({"treatment": "a", "control": "b", "bound": "1.0"},), KEY, "within",
                 margin=0.1)


def test_no_gain_reads_harm_as_no_gain_and_says_so(tmp_path) -> None:
    """spurious_rewards_no_gain's kind: "no gain beyond noise" is one-sided. A reward that lowers
    pass@1 gives no gain (reproduced, harm found); one within noise too; only a gain beyond the
    margin fails it. `within` would have read the harm as "not reproduced"."""
    rng = np.random.default_rng(0)
    ease = rng.uniform(0.3, 0.7, 100)
    write_base(tmp_path, ease)
    for name, shift in (("harm", -0.2), ("same", 0.0), ("gain", 0.2)):
        for seed in range(3):
            write_run(tmp_path, name, seed, np.clip(ease + shift + rng.normal(0, 0.01, 100), 0, 1))

    def no_gain(arm: str, kind: str = "no_gain") -> cl.Verdict:
        [v], _ = judge(tmp_path, cl.Claim(arm, "0", "F", "s", ((arm, "base"),), KEY, kind, margin=0.05))
        return v

    assert (no_gain("harm").verdict, no_gain("harm").reason) == (
        cl.REPRODUCED, "no gain: the interval lies below 0 (harm found)")
    assert no_gain("same").verdict == cl.REPRODUCED and "harm" not in no_gain("same").reason
    assert no_gain("gain").verdict == cl.NOT_REPRODUCED
    assert no_gain("harm", "within").verdict == cl.NOT_REPRODUCED      # the mislabel it replaces
    assert cl.Pair("a", "b", "no_gain", margin=0.05).expected() == "no gain beyond +0.05"


def test_holm_across_a_claims_comparisons_keeps_only_the_failures_that_clear_its_level() -> None:
    """The family rule (`family: comparisons: holm`): "not reproduced" needs one comparison
    only, so each must clear Holm's step-down level over the claim's comparisons. One whose
    interval just excludes the effect (one-sided p between 2.5% / 2 and 2.5%) is inconclusive
    beside a second comparison; alone it would stand."""
    rule = claim(min_effect=0.1)
    pair = cl.Pair("t", "c", "greater", min_effect=0.1)
    two = replace(rule, comparisons=(pair, cl.Pair("u", "c", "greater", min_effect=0.1)))

    def comp(t: str, d: float, se: float, df: float = 20.0) -> cl.Comparison:
        half = float(stats.st.t.ppf(0.975, df)) * se
        verdict, reason = cl.decide(pair, d, d - half, d + half)
        return cl.Comparison(t, "c", {}, d, d - half, d + half, "", verdict, reason, se=se, df=df)

    close = comp("t", 0.055, 0.02)    # upper bound just below +0.10: p about 0.018
    clear = comp("u", 0.0, 0.02)      # far below: p about 1e-5
    assert close.verdict == clear.verdict == cl.NOT_REPRODUCED
    p = cl.p_not_reproduced(pair, stats.Estimate(0.055, close.low, close.high, 0.02, 20.0))
    assert 0.0125 < p < 0.025
    # u clears 0.025 / 2, then t needs 0.025 / 1: both stand.
    assert [x.verdict for x in cl.family(two, [close, clear])] == [cl.NOT_REPRODUCED] * 2
    # Beside another near miss, neither clears 0.025 / 2: both inconclusive, and they say why.
    kept = cl.family(two, [close, comp("u", 0.055, 0.02)])
    assert [x.verdict for x in kept] == [cl.INCONCLUSIVE] * 2
    assert kept[0].reason.startswith("the interval excludes +0.10, but not at Holm's level across "
                                     "the claim's 2 comparisons (one-sided p = 0.0")
    assert cl.family(rule, [close])[0].verdict == cl.NOT_REPRODUCED          # one comparison: no family
    assert cl.family(two, [close, clear], cl.Family("none", "agree")) == [close, clear]


def test_a_within_claim_undecided_on_both_bases_says_what_its_numbers_support() -> None:
    """rlme_tracks_rlvr's line, by rule: undecided at the declared cap on both bases, its
    interval below 0 on both: "rlme below rlvr on both bases (the interval excludes 0); the
    ±0.10 margin undecided at the declared cap"; below 0 on one base only, it says which."""
    tracks = next(c for c in cl.CLAIMS if c.id == "rlme_tracks_rlvr")
    x = cl.Comparison("rlme", "rlvr", {}, -0.17, -0.29, -0.05, "", cl.INCONCLUSIVE, "r",
                      plan={"seeds": 10, "beyond": "more than the cap"}, side="below")
    v = cl.Verdict(tracks, (x,), cl.INCONCLUSIVE, "rlme below rlvr ...")
    below = {"verdict": cl.INCONCLUSIVE, "comparisons": [{"side": "below", "capped": True}]}
    assert cl.headline(replace(v, second=below)).reason == (
        "rlme below rlvr on both bases (the interval excludes 0); the ±0.10 margin undecided at "
        "the declared cap")
    straddles = {"verdict": cl.INCONCLUSIVE, "comparisons": [{"side": "", "capped": True}]}
    assert cl.headline(replace(v, second=straddles)).reason == (
        "rlme below rlvr on the first base (the interval excludes 0; on the second it includes 0); "
        "the ±0.10 margin undecided at the declared cap")
    assert cl.headline(replace(v, second=straddles)).verdict == cl.INCONCLUSIVE


# ------------------------------------------------------------------------------ the declared claims

def test_the_declared_claims_name_known_arms_and_benchmarks() -> None:
    params = load()
    assert len(cl.CLAIMS) >= 9 and len({c.id for c in cl.CLAIMS}) == len(cl.CLAIMS)
    for c in cl.CLAIMS:
        for arm in [a for a in c.arms + c.precondition_arms if not cl.is_base(a)]:  # a base: no runs
            preset, _, name = arm.rpartition("/")
            study = load(preset=preset) if preset else params
            study.method_config(name)  # raises for a name that is neither a method nor a variant
            # An arm a run can decide is an arm of the study that runs it: the default study's
            # `methods`, or the preset's own (python -m flows.pipeline --study <preset>).
            assert c.blocked or name in study.methods, (c.id, arm)
        if c.measure == "test" and not c.blocked:
            bench = c.metric.partition("/")[0]
            assert bench in BENCHMARKS, c.id


def test_a_bad_declaration_fails_at_once() -> None:
    with pytest.raises(ValueError, match="needs a margin"):
        cl.Claim("w", "000", "Fig. 2", "s", (("a", "b"),), KEY, "within")
    with pytest.raises(ValueError, match="measure 'curve'"):
        cl.Claim("w", "000", "Fig. 2", "s", (("a", "b"),), KEY, "greater", measure="curve")


# ------------------------------------------------------------------------------ the report

def test_the_report_opens_its_science_with_the_claims_and_writes_claims_json(tmp_path) -> None:
    data = tmp_path / "data"
    t, c = items_world(shift=0.0, noise=0.02, seeds=5)
    for name, table in (("rlme", t), ("rlvr", c)):
        for seed, row in enumerate(table):
            write_run(data, name, seed, row)
    write(data / "eval" / "rlme" / "seed0" / "items.json",   # malformed: a counted skip
          {"arith": {"ids": "arith-test-00000", "metrics": {"pass@1": [1.0]}}})
    out = tmp_path / "reports"
    rep.build(out, data)
    record = json.loads((out / "claims.json").read_text())
    assert [x["id"] for x in record["claims"]] == [c.id for c in cl.CLAIMS]
    assert record["rule"] == cl.RULE and record["resamples"] == 10_000
    assert record["family"] == {"comparisons": "holm", "bases": "agree"} and "Family: " in cl.RULE
    tracks = record["claims"][0]
    # Reproduced on this base; the family rule's headline needs the second base to agree, and it
    # has not run: inconclusive, the first base's verdict kept beside it.
    assert tracks["first_base"]["verdict"] == cl.REPRODUCED and tracks["verdict"] == cl.INCONCLUSIVE
    assert tracks["comparisons"][0]["seeds"] == {"rlme": 5, "rlvr": 5}
    assert record["notes"] == ["data/eval/rlme/seed0/items.json: arith: `ids` must be a list of "
                               "strings; skipped, its comparisons use seeds only"]
    assert tracks["comparisons"][0]["basis"] == "seeds only (no per-item scores in 1 of 10 runs)"
    anchoring = record["claims"][1]
    assert anchoring["reason"] == (
        "precondition undecided: unanchored long self-evaluation hacks (train reward rises); "
        "unanchored long self-evaluation hacks (held-out accuracy falls from its best)")
    assert [p["status"] for p in anchoring["preconditions"]] == ["undecided", "undecided"]
    assert record["plan"]["weak_evaluator/rlme_long"] == cl.PILOT
    page = (out / "index.html").read_text()
    # The answer (which method won) first, then the science opens with the claims.
    assert page.index("<section id='result'>") < page.index("<section id='claims'>") < page.index(
        "<section id='curves'>")
    assert "data-claim='rlme_tracks_rlvr'" in page and "Rule: Per item" in page
    summary = (out / "summary.md").read_text()
    assert "Per-item files skipped:\n\n- data/eval/rlme/seed0/items.json: arith: `ids`" in summary
    row = next(line for line in summary.splitlines() if line.startswith("| RLME"))
    d = cl.verdicts(collect(data).runs)[0][0].comparisons[0]
    assert f"{rep._signed(d.difference)} [{rep._signed(d.low)}, {rep._signed(d.high)}]" in row
    assert row.endswith("| not run | **inconclusive**: first base reproduced, the second base not run: a "
                        "headline verdict needs both bases to agree (first base: interval inside ±0.10) |")
    # Every verdict says whether it holds on the second base: here none of its runs exist.
    assert all(x["second_base"]["verdict"] == cl.NOT_RUN for x in record["claims"])
    assert tracks["second_base"]["studies"] == ["default.seed1"]


def test_the_declarations_file_and_a_malformed_one(tmp_path):
    assert cl.load_claims() == cl.CLAIMS
    bad = tmp_path / "claims.yaml"
    bad.write_text("claims:\n- {id: x, paper: '000', figure: Fig. 1, statement: s, comparisons: [[a]],"
                   " metric: m, kind: greater}\n")
    with pytest.raises(DataError, match=r"claims.yaml: claim x: .*\(treatment, control\) pairs"):
        cl.load_claims(bad)
    bad.write_text("claims: [{id: y, paper: '000'}]\n")
    with pytest.raises(DataError, match="claim y"):
        cl.load_claims(bad)
    bad.write_text("{not: a list}\n")
    with pytest.raises(DataError, match="expected a mapping of `family`"):
        cl.load_claims(bad)
    # The family rule is declared in the same file, and a misspelt one fails at load.
    assert cl.load_family() == cl.FAMILY == cl.Family("holm", "agree")
    bad.write_text("family: {comparisons: bonferroni}\nclaims: []\n")
    with pytest.raises(DataError, match="family: comparisons must be holm or none"):
        cl.load_family(bad)


def test_a_preset_study_decides_its_claim_and_the_report_lists_what_is_still_needed(tmp_path) -> None:
    """Runs recorded in studies/hint_copier/ are the claim's `hint_copier/...` arms, its base the
    preconditions' control; the claims section lists, per command, the arms that still lack the
    seeds the power rule plans (not those waiting for their claim's preconditions)."""
    data = tmp_path / "data"
    study = tmp_path / "studies" / "hint_copier" / "data" / "eval"
    for name, cheat in (("rlme_nocheat", 0.05), ("rlme", 0.30), ("rlvr", 0.20)):
        for seed in range(5):
            write_cf(study / name / f"seed{seed}", cheat + 0.01 * seed, 0.6 - cheat + 0.01 * seed)
    write_cf(study / "base", 0.04)
    write_run(data, "rlme", 0, [1.0, 0.0])  # the default study: rlme has 1 of 3 seeds
    rep.build(tmp_path / "reports", data)
    record = json.loads((tmp_path / "reports" / "claims.json").read_text())
    claims = {c["id"]: c for c in record["claims"]}
    nocheat = claims["nocheat_stops_copying"]
    assert nocheat["comparisons"][0]["seeds"] == {"hint_copier/rlme_nocheat": 5, "hint_copier/rlme": 5}
    assert [p["status"] for p in nocheat["preconditions"]] == ["holds", "holds"]
    # Reproduced on this base; its second base has not run, so the headline (the family rule
    # across bases) waits for it.
    assert nocheat["first_base"]["verdict"] == cl.REPRODUCED and nocheat["verdict"] == cl.INCONCLUSIVE
    assert nocheat["comparisons"][0]["difference"] == pytest.approx(-0.25)
    assert nocheat["comparisons"][1]["label"] == "counterfactual accuracy higher"
    assert nocheat["comparisons"][1]["difference"] == pytest.approx(0.25)  # Fig. 7's axis, decided too
    summary = (tmp_path / "reports" / "summary.md").read_text()
    needed = summary.split("Runs still needed for a verdict:")[1].split("\n\n")[1].splitlines()
    assert needed[0].startswith("- `make study ARGS='--methods ")
    assert "rlme (1 of 3 seeds)" in needed[0] and "r3_gate (0 of 3 seeds)" in needed[0]
    assert not any("--study hint_copier`" in line for line in needed)  # decided: nothing left to run there
    # ... but on its second base, not run yet: the pilot of the precondition's arms first.
    assert ("- `python -m flows.pipeline --study hint_copier.seed1 --no-extend --methods rlme rlvr`: "
            "hint_copier.seed1/rlme (pilot), hint_copier.seed1/rlvr (pilot)") in needed
    # Preconditions first: the anchored arms wait until unanchored long RLME is shown to hack.
    assert "- `python -m flows.pipeline --study weak_evaluator`: weak_evaluator/rlme_long (0 of 3 seeds)" in needed
    assert not any("rlme_gt10_long" in line for line in needed)
    page = (tmp_path / "reports" / "index.html").read_text()
    assert "<ul class='needed'>" in page and "(the hint_copier study&#x27;s base)" in page


def study_needs(root: Path):
    """What the claim `s/t` beats `s/c` (arms of study `s` under `root/studies`) still needs, read
    as the report reads it: a callable, so a test can change the files between readings."""
    some = cl.Claim("x", "000", "Fig. 0", "t beats c", (("s/t", "s/c"),), KEY, "greater", min_effect=0.02)

    def needs() -> str:
        data = root / "data"
        [v], _ = cl.verdicts(rep.with_studies(collect(data), data).runs, [some])
        return v.needs

    return needs


def test_the_cost_of_more_seeds_reads_a_studys_committed_stage_times(tmp_path) -> None:
    """A study's record holds no run.json; its stage times (times.json, times.plan.json for the
    seeds the plan added) give the training's share of what the seeds still needed cost. A stage
    restored rather than run is no measure of a training."""
    study = tmp_path / "studies" / "s"
    t, c = items_world(shift=0.08, noise=0.2, seeds=3)  # +0.02 declared: the plan wants 10 seeds
    arms(study / "data", t, c)
    for arm in ("t", "c"):
        for seed in range(3):
            path = study / "data" / "eval" / arm / f"seed{seed}" / "metrics.json"
            write(path, {**json.loads(path.read_text()), "eval_seconds": 100.0})
    full = study_needs(tmp_path)
    # The declared +0.02 against the pilot's spread puts 80% power beyond the cap: that is said
    # after the cost, with the power the cap leaves and the seeds 80% would need.
    assert full().endswith("; the power rule wants more than the cap of 10 seeds per arm even with more "
                           "items (the declared effect is 0.020; at the cap its power is 65%; 80% needs "
                           "14 seeds per arm)")

    def needs() -> str:
        return full().split("; the power rule wants")[0]

    assert needs().endswith("14 more runs, at least 0.4 CPU-h (their evaluations alone: no training "
                            "time is committed)")   # 14 × 100 s
    write(study / "times.json", {"stages": {
        **{f"train@{a}-{s}": {"action": "run", "seconds": 3500.0} for a in "tc" for s in range(3)},
        "train@t-0": {"action": "restore", "seconds": 1.0},            # kept, not trained here
        "evaluate@t-0": {"action": "run", "seconds": 100.0}}})
    write(study / "times.plan.json", {"stages": {"train_extra@c-3": {"action": "run", "seconds": 3500.0}}})
    assert needs().endswith("14 more runs, about 14 CPU-h (train + evaluate: committed stage times)")
    write(study / "times.json", "{not json")                              # unreadable: skipped
    (study / "times.plan.json").unlink()
    assert needs().endswith("(their evaluations alone: no training time is committed)")


def test_an_arm_not_yet_run_on_a_second_base_costs_what_its_method_costs_in_the_default_study(tmp_path) -> None:
    """A second base's arm with no run (so no stage time) is priced from the same method's runs
    of the default study, and the text says so; without them its cost stays unknown."""
    study = tmp_path / "studies" / "s"
    t, c = items_world(shift=0.08, noise=0.2, seeds=3)
    arms(study / "data", {}, c)                                  # s/t: not one run yet
    needs = study_needs(tmp_path)

    assert needs() == "the 3 pilot seeds of s/t (3 more runs; cost unknown (no committed stage time))"
    arms(tmp_path / "data", t, {})                               # the default study's t: 3 runs
    for seed in range(3):
        path = tmp_path / "data" / "eval" / "t" / f"seed{seed}" / "metrics.json"
        write(path, {**json.loads(path.read_text()), "eval_seconds": 1200.0})
    assert needs() == ("the 3 pilot seeds of s/t (3 more runs, at least 1.0 CPU-h (their evaluations alone: "
                       "no training time is committed; an arm with none of its own: its method's runs in "
                       "the default study))")


def test_a_failed_precondition_makes_the_claim_not_tested(tmp_path) -> None:
    """The setting cannot show the claim: RLME does not learn to copy (its cheat rate is below the
    base's), so the nocheat comparison is not a test of it, whatever its interval."""
    study = tmp_path / "studies" / "hint_copier" / "data" / "eval"
    for name, cheat in (("rlme_nocheat", 0.01), ("rlme", 0.02), ("rlvr", 0.02)):
        for seed in range(5):
            write_cf(study / name / f"seed{seed}", cheat + 0.001 * seed)
    write_cf(study / "base", 0.05)
    runs = rep.with_studies(collect(tmp_path / "data"), tmp_path / "data").runs
    [v], _ = cl.verdicts(runs, [c for c in cl.CLAIMS if c.id == "nocheat_stops_copying"], second=None)
    assert v.verdict == cl.NOT_TESTED
    assert v.reason.startswith("precondition failed: RLME (outcome question) learns to copy")
    assert v.preconditions[0].status == cl.FAILS and v.preconditions[0].comparison.high < 0
    rows = rep.claims_markdown([v])
    assert "**not tested**" in rows and "precondition fails: RLME" in rows
    # The verdict cell names each precondition once, with its status and numbers.
    assert rows.count("RLME (outcome question) learns to copy") == 1 and "precondition failed:" not in rows
    assert "(rlme − base -0.029 [-0.031, -0.027]: the interval excludes +0.02)" in rows  # what was measured


# ------------------------------------------------------------------------------ the second base

def test_each_claim_is_decided_again_on_the_second_base_alone(tmp_path) -> None:
    """The same claim on the runs of the base built with seed 1 (studies/default.seed1/): its own
    verdict, difference and interval, from those runs only. Here the first base shows the gain and
    the second does not, so the second base's verdict differs: pooling would have hidden it."""
    data = tmp_path / "data"
    t, c = items_world(shift=0.3, seeds=3)
    arms(data, t, c)
    second = tmp_path / "studies" / "default.seed1" / "data"
    t2, c2 = items_world(shift=0.0, seeds=3, seed=1)
    arms(second, t2, c2)
    runs = rep.with_studies(collect(data), data).runs
    assert {"t", "c", "default.seed1/t", "default.seed1/c"} <= set(runs)
    [v], _ = cl.verdicts(runs, (claim(min_effect=0.1),))
    assert own(v) == cl.REPRODUCED
    two = v.second
    assert two["verdict"] == cl.NOT_REPRODUCED and two["agrees"] is False
    assert two["studies"] == ["default.seed1"]
    assert two["diff"] == pytest.approx(t2.mean() - c2.mean(), abs=1e-4)
    assert two["ci"][0] < 0.1 and two["comparisons"][0]["seeds"] == {"default.seed1/t": 3,
                                                                     "default.seed1/c": 3}
    # The first base's numbers are the first base's runs alone.
    assert v.comparisons[0].seeds == {"t": 3, "c": 3}
    assert v.comparisons[0].difference == pytest.approx(t.mean() - c.mean())
    assert rep.second_base_cell(v)[0] == cl.NOT_REPRODUCED
    assert rep.second_base_cell(v)[-1] == "differs from the first base"
    # The family rule across bases (evals/claims.yaml `family: bases: agree`): the headline is
    # the verdict both bases give; here they differ, so it is inconclusive and says why.
    assert v.verdict == cl.INCONCLUSIVE and v.first["verdict"] == cl.REPRODUCED
    assert v.reason.startswith("first base reproduced, second base not reproduced: a headline verdict "
                               "needs both bases to agree (first base: interval above 0")
    assert cl.claims_json([v], [])["claims"][0]["first_base"]["verdict"] == cl.REPRODUCED
    # Where they agree the headline is theirs, the first base's reason unchanged.
    arms(second, t, c)
    [w], _ = cl.verdicts(rep.with_studies(collect(data), data).runs, (claim(min_effect=0.1),))
    assert w.verdict == w.second["verdict"] == cl.REPRODUCED and not w.first
    # The family rule declared otherwise (`bases: first`): the first base's verdict alone.
    alone = cl.headline(replace(v, verdict=own(v), reason="r", first={}), cl.Family("holm", "first"))
    assert alone.verdict == cl.REPRODUCED


def test_an_undecided_second_base_neither_agrees_nor_differs(tmp_path) -> None:
    """First base reproduced, second base inconclusive (its gain sits on the bound it must
    clear): the report says the second base's verdict and nothing about agreement; saying it
    "differs from the first base" would read as a contradiction the runs do not show."""
    data = tmp_path / "data"
    t, c = items_world(shift=0.3, seeds=3)
    arms(data, t, c)
    second = tmp_path / "studies" / "default.seed1" / "data"
    t2, c2 = items_world(shift=0.1, seeds=3, noise=0.2, seed=1)
    arms(second, t2, c2)
    runs = rep.with_studies(collect(data), data).runs
    [v], _ = cl.verdicts(runs, (claim(min_effect=0.1),))
    assert own(v) == cl.REPRODUCED
    assert v.second["verdict"] == cl.INCONCLUSIVE and v.second["agrees"] is None
    cell = rep.second_base_cell(v)
    assert cell[0] == cl.INCONCLUSIVE and "agrees" not in cell
    assert "differs from the first base" not in cell


def test_a_claim_on_the_base_alone_is_decided_on_the_second_base_once_it_is_evaluated(tmp_path) -> None:
    """r3_resists_dilution's kind: one arm, the base, against 0. The second base's evaluation
    alone decides it there (before, such a claim stayed `not run` for want of a trained arm)."""
    rng = np.random.default_rng(0)
    data, second = tmp_path / "data", tmp_path / "studies" / "default.seed1" / "data"
    for folder, shift in ((data, 0.3), (second, 0.0)):
        write_base(folder, np.clip(shift + rng.normal(0, 0.02, 80), -1, 1))
    on_base = cl.Claim("x", "000", "Fig. 0", "the base beats 0", (("base", None),), KEY, "greater",
                       min_effect=0.1)
    runs = rep.with_studies(collect(data), data).runs
    [v], _ = cl.verdicts(runs, (on_base,))
    assert own(v) == cl.REPRODUCED
    assert v.second["verdict"] == cl.NOT_REPRODUCED and v.second["agrees"] is False
    assert v.second["diff"] == pytest.approx(0.0, abs=0.01)
    # Not evaluated there: not run.
    runs.pop("default.seed1/base")
    [v], _ = cl.verdicts(runs, (on_base,))
    assert v.second["verdict"] == cl.NOT_RUN


def test_a_precondition_on_the_second_base_alone_decides_not_tested_before_any_arm_trains(tmp_path) -> None:
    """lcs_beats_direct's kind: a precondition read from the base's evaluation ("the base
    produces keyword dumps"). Failed on the second base, the claim is not tested there with no
    trained arm and no pilot to run; held, the claim waits for its arms' pilot (`not run`)."""
    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    t, c = items_world(shift=0.3, seeds=3)
    arms(data, t, c)
    second = tmp_path / "studies" / "default.seed1" / "data"
    gated = claim(min_effect=0.1, preconditions=(
        cl.Precondition("the base scores", "base", None, KEY, min_effect=0.1),))
    for folder, shift in ((data, 0.3), (second, 0.0)):
        write_base(folder, np.clip(shift + rng.normal(0, 0.02, 80), -1, 1))
    runs = rep.with_studies(collect(data), data).runs
    assert not runs.get("default.seed1/t") and not runs.get("default.seed1/c")
    [v], _ = cl.verdicts(runs, (gated,))
    assert own(v) == cl.REPRODUCED
    assert v.second["verdict"] == cl.NOT_TESTED and v.second["short_of_pilot"] == []
    assert v.second["preconditions"][0]["status"] == cl.FAILS
    # What was measured there is recorded, and the report's second-base cell names it.
    detail = v.second["preconditions"][0]["detail"]
    assert detail.startswith("default.seed1/base ") and "excludes +0.1" in detail
    cell = rep.second_base_cell(v)
    assert cell[0] == cl.NOT_TESTED
    assert cell[1] == f"precondition fails: the base scores ({detail.removeprefix('default.seed1/')})"
    assert f"<span class='muted'>{html.escape(cell[1])}</span>" in rep.claims_html([v])
    assert rep.runs_needed([v]) == []
    # The same base scoring well there: the precondition holds, and the arms' pilot comes next.
    write_base(second, np.clip(0.3 + rng.normal(0, 0.02, 80), -1, 1))
    runs = rep.with_studies(collect(data), data).runs
    [v], _ = cl.verdicts(runs, (gated,))
    assert v.second["verdict"] == cl.NOT_RUN
    assert v.second["short_of_pilot"] == ["default.seed1/c", "default.seed1/t"]


def test_the_second_base_is_never_pooled_with_a_stale_or_other_base(tmp_path) -> None:
    """A second-base study whose runs stand on two bases (its dvc.lock says so) refuses the
    comparison, like the first base: inconclusive, "different bases"."""
    import yaml

    data = tmp_path / "data"
    t, c = items_world(shift=0.3, seeds=3)
    arms(data, t, c)
    root = tmp_path / "studies" / "default.seed1"
    arms(root / "data", t, c)
    new, old = "a" * 32 + ".dir", "b" * 32 + ".dir"
    stages = {f"train@{m}-{s}": {"deps": [{"path": "data/base_model", "md5": new if m == "t" else old}]}
              for m in ("t", "c") for s in range(3)}
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    runs = rep.with_studies(collect(data), data).runs
    [v], _ = cl.verdicts(runs, (claim(min_effect=0.1),))
    assert own(v) == cl.REPRODUCED
    assert v.second["verdict"] == cl.INCONCLUSIVE and "different bases" in v.second["reason"]


def test_a_second_base_names_the_pilot_runs_it_lacks_and_the_command_that_runs_them(tmp_path) -> None:
    """Each claim's second base lists its trained arms short of their pilot seeds there (a stale
    run does not count; a trained precondition arm first, as the plan runs it), and the report's
    "runs still needed" gives the one command per study that runs only those arms."""
    from dataclasses import replace

    data = tmp_path / "data"
    t, c = items_world(shift=0.3, seeds=3)
    arms(data, t, c)
    second = tmp_path / "studies" / "default.seed1" / "data"
    arms(second, t, c)
    runs = {k: dict(v) for k, v in rep.with_studies(collect(data), data).runs.items()}
    runs["default.seed1/c"] = {0: runs["default.seed1/c"][0],
                               1: replace(runs["default.seed1/c"][1], stale="trained from base b")}
    [v], _ = cl.verdicts(runs, (claim(min_effect=0.1),))
    assert v.second["short_of_pilot"] == ["default.seed1/c"]
    assert ("python -m flows.pipeline --study default.seed1 --no-extend --methods c",
            ["default.seed1/c (pilot)"]) in rep.runs_needed([v])
    # With a precondition on a trained arm not yet run there, that arm alone comes first.
    gated = claim(min_effect=0.1, preconditions=(cl.Precondition("p rises", "p", None, KEY),))
    [v], _ = cl.verdicts(runs, (gated,))
    assert v.second["short_of_pilot"] == ["default.seed1/p"]
    # Every pilot there (and the first base's): nothing to run.
    runs["default.seed1/c"] = rep.with_studies(collect(data), data).runs["default.seed1/c"]
    [v], _ = cl.verdicts(runs, (claim(min_effect=0.1),))
    assert v.second["short_of_pilot"] == [] and rep.runs_needed([v]) == []


def test_a_second_base_names_the_planned_seeds_it_lacks_once_its_pilot_is_in(tmp_path) -> None:
    """Past its pilot, a second base the pilot leaves undecided lists the arms short of the seeds
    the plan from that pilot asks (found, planned), and "runs still needed" gives the command
    that runs them (`--methods`: the plan of those arms' comparisons, flows/pipeline.py); once
    they ran, nothing. Before, the README named a second base's pilots only, and the planned
    seeds were in claims.json alone."""
    data = tmp_path / "data"
    t, c = items_world(shift=0.3, seeds=3)
    arms(data, t, c)
    second = tmp_path / "studies" / "default.seed1" / "data"
    t2, c2 = items_world(shift=0.08, noise=0.1, seeds=10, seed=1)
    # Seeds disagree, enough that the declared +0.10 needs more than the pilot (the plan reads
    # the pilot's spread and the declared effect, not its difference).
    t2 = np.clip(t2 + np.random.default_rng(0).normal(0, 0.12, (10, 1)), 0, 1)
    arms(second, t2[:3], c2[:3])
    [v], _ = cl.verdicts(rep.with_studies(collect(data), data).runs, (claim(min_effect=0.1),))
    assert own(v) == cl.REPRODUCED and v.second["verdict"] == cl.INCONCLUSIVE
    plan = v.second["short_of_plan"]
    assert set(plan) == {"default.seed1/c", "default.seed1/t"}
    assert all(found == 3 < planned for found, planned in plan.values())
    n = plan["default.seed1/t"][1]
    assert rep.runs_needed([v]) == [(
        "python -m flows.pipeline --study default.seed1 --methods c t",
        [f"default.seed1/c (3 of {n} seeds)", f"default.seed1/t (3 of {n} seeds)"])]
    assert ("<li><code>python -m flows.pipeline --study default.seed1 --methods c t</code>: "
            f"default.seed1/c (3 of {n} seeds), default.seed1/t (3 of {n} seeds)</li>") in rep.claims_html([v])
    # An arm u far below c there (and above it on the first base): the claim "t and u beat c"
    # fails there whatever t's seeds say, so none are needed, on either base.
    for folder, control, shift in ((data, c, 0.3), (second, c2, -0.3)):
        for seed in range(3):
            write_run(folder, "u", seed, np.clip(control[seed] + shift, 0, 1))
    both = cl.Claim("x", "000", "Fig. 0", "t and u beat c", (("t", "c"), ("u", "c")), KEY, "greater",
                    min_effect=0.1)
    [v], _ = cl.verdicts(rep.with_studies(collect(data), data).runs, (both,))
    assert v.second["verdict"] == cl.NOT_REPRODUCED and v.second["comparisons"][0]["verdict"] == cl.INCONCLUSIVE
    assert v.second["short_of_plan"] == {} and rep.runs_needed([v]) == []
    arms(second, t2[:n], c2[:n])
    [v], _ = cl.verdicts(rep.with_studies(collect(data), data).runs, (claim(min_effect=0.1),))
    assert v.second["short_of_plan"] == {} and rep.runs_needed([v]) == []


def test_second_base_names() -> None:
    assert cl.second_base_arm("rlme") == "default.seed1/rlme"
    assert cl.second_base_arm("hint_copier/base", 2) == "hint_copier.seed2/base"
    assert cl.parse_study("default.seed1") == ("", 1)
    assert cl.parse_study("hint_copier.seed3") == ("hint_copier", 3)
    assert cl.parse_study("hint_copier") == ("hint_copier", None)
    moved = cl.on_second_base(next(c for c in cl.CLAIMS if c.id == "nocheat_stops_copying"))
    assert moved.arms == ["hint_copier.seed1/rlme_nocheat", "hint_copier.seed1/rlme"]
    assert set(moved.precondition_arms) == {"hint_copier.seed1/rlme", "hint_copier.seed1/base",
                                            "hint_copier.seed1/rlvr"}


def test_a_control_read_on_its_own_metric_pairs_the_items(tmp_path) -> None:
    """TTRL's claim (evals/claims.yaml): the treatment's pass@1 against the base's maj@k, item by
    item. The base's pass@1 is far lower than its maj@k here, so reading the control on the
    treatment's metric would call a gain that the majority vote does not leave."""
    rng = np.random.default_rng(3)
    ease = rng.uniform(0.2, 0.8, 80)
    maj = (ease > 0.4).astype(float)
    write(tmp_path / "eval" / "base" / "metrics.json", {KEY: 0.3, "arith/maj@k": float(maj.mean())})
    write(tmp_path / "eval" / "base" / "items.json",
          {"arith": {"headline": "pass@1", "ids": [f"arith-test-{i:05d}" for i in range(80)],
                     "metrics": {"pass@1": [0.3] * 80, "maj@k": maj.tolist()}}})
    for seed in range(3):
        write_run(tmp_path, "t", seed, np.clip(maj + rng.normal(0, 0.02, 80), 0, 1))
    own = cl.Claim("x", "x", "T", "t beats the base's vote",
                   ({"treatment": "t", "control": "base", "control_metric": "arith/maj@k"},), KEY,
                   "greater", min_effect=0.05)
    # (+0.20 declared: against the base's pass@1 the items disagree widely, and 0.05 would need
    # more seeds than the pilot to decide with 80% power.)
    same = cl.Claim("y", "x", "T", "t beats the base", (("t", "base"),), KEY, "greater", min_effect=0.2)
    [v_own, v_same], _ = judge(tmp_path, own, same)
    [x] = v_own.comparisons
    assert abs(x.difference) < 0.02 and v_own.verdict == cl.NOT_REPRODUCED, (x.difference, v_own.reason)
    assert v_same.comparisons[0].difference > 0.2 and v_same.verdict == cl.REPRODUCED
    assert "80 items paired by id" in x.basis
    assert "and base's arith/maj@k" in rep.claim_cells(v_own)[3]


def test_a_command_whose_study_record_ships_no_base_says_it_builds_one_first(tmp_path) -> None:
    """A study recorded before records shipped their base (cot_reference, keyword_dump): its
    next call builds the base again first (73 min for cot_reference), and a CPU that builds
    another one makes every recorded run stale. "Runs still needed" says so beside its command,
    with the build's recorded time; not for a record that ships its base, a study on the
    repository's base, a study with no record, or the default study's command."""
    lock = "stages: {{build_base: {{outs: [{{path: data/base_model, md5: {}}}]}}}}\n"
    (tmp_path / "dvc.lock").write_text(lock.format("aaa.dir"))
    rec = tmp_path / "studies" / "s"
    write(rec / "times.json", {"stages": {"build_base": {"action": "run", "seconds": 1800.0}}})
    (rec / "dvc.lock").write_text(lock.format("bbb.dir"))
    note = rep.base_first("python -m flows.pipeline --study s --methods a b", tmp_path)
    assert note.startswith("builds the study's base first") and "30 min" in note and "stale" in note
    assert rep.base_first("python -m flows.pipeline --study s.seed1 --methods a", tmp_path) == ""
    assert rep.base_first("make study ARGS='--methods a b'", tmp_path) == ""
    (tmp_path / "studies" / "t").mkdir()
    (tmp_path / "studies" / "t" / "dvc.lock").write_text(lock.format("aaa.dir"))  # the repository's base
    assert rep.base_first("python -m flows.pipeline --study t", tmp_path) == ""
    (rec / "data" / "base_model").mkdir(parents=True)
    assert rep.base_first("python -m flows.pipeline --study s", tmp_path) == ""
