"""Seeds by plan (flows/pipeline.py, tasks/studies.py, evals/claims.py): the pipeline runs the pilot
seeds, then the seeds the claims' power rule plans from the pilot alone (params `extra_runs`, the
DVC stages train_extra@ / evaluate_extra@), then the report. The plan is fixed from the pilot: no
seed run after it can move it. No training runs here."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from core.io import write_json
from core.params import ROOT, ParamsError, load, read_raw, validate
from evals import claims as cl
from flows.configure import build_config
from flows.report_collect import collect
from tasks import studies

KEY = "arith/pass@1"


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def write_run(data: Path, method: str, seed: int, scores) -> None:
    scores = [float(x) for x in scores]
    write(data / "eval" / method / f"seed{seed}" / "metrics.json", {KEY: float(np.mean(scores))})
    write(data / "eval" / method / f"seed{seed}" / "items.json",
          {"arith": {"headline": "pass@1", "ids": [f"arith-test-{i:05d}" for i in range(len(scores))],
                     "metrics": {"pass@1": scores}}})


def noisy_arms(data: Path, seeds, arms=("t", "c"), shift=0.04, seed=0) -> None:
    """Two arms whose seeds disagree (a between-seed spread), so the plan asks for more than the
    pilot; seed s of an arm is the same whatever other seeds exist."""
    rng = np.random.default_rng(seed)
    ease = rng.uniform(0.2, 0.7, 80)
    offsets = {a: rng.normal(0, 0.06, 20) for a in arms}
    for i, arm in enumerate(arms):
        for s in seeds:
            row = np.clip(ease + (shift if i == 0 else 0.0) + offsets[arm][s]
                          + np.random.default_rng(100 * i + s).normal(0, 0.05, 80), 0, 1)
            write_run(data, arm, s, row)


def precondition_pilot(data: Path, setting: str) -> None:
    """The pilot of a precondition's arms, p beats q: `undecided` (noisy), `holds` or `fails`."""
    if setting == "undecided":
        noisy_arms(data, range(3), arms=("p", "q"))
        return
    rng = np.random.default_rng(1)
    ease = rng.uniform(0.3, 0.6, 80)
    for s in range(3):
        write_run(data, "q", s, np.clip(ease + rng.normal(0, 0.02, 80), 0, 1))
        write_run(data, "p", s, np.clip(ease + (0.3 if setting == "holds" else -0.3)
                                        + rng.normal(0, 0.02, 80), 0, 1))


def claim(**kw) -> cl.Claim:
    return cl.Claim("x", "000", "Fig. 0", "t beats c", (("t", "c"),), KEY, "greater",
                    min_effect=kw.pop("min_effect", 0.02), **kw)


def plan_of(data: Path, *claims: cl.Claim) -> dict[str, int]:
    found, _ = cl.verdicts(collect(data).runs, claims or (claim(),), resamples=1, second=None)
    return cl.seed_plan(found)


# ------------------------------------------------------------------------------ the plan

def test_the_plan_is_made_from_the_pilot_and_no_later_seed_moves_it(tmp_path) -> None:
    data = tmp_path / "data"
    noisy_arms(data, range(3))
    pilot = plan_of(data)
    assert pilot["t"] == pilot["c"] > cl.PILOT  # undecided on the pilot: more seeds planned
    noisy_arms(data, range(3, 8))               # the planned seeds ran
    assert plan_of(data) == pilot
    write_run(data, "t", 4, np.zeros(80))        # an extra seed's result changes: the plan does not
    write_run(data, "c", 5, np.ones(80))
    assert plan_of(data) == pilot
    assert cl.planned_seeds(collect(data).runs, "", (claim(),)) == pilot


def test_a_missing_pilot_seed_is_never_replaced_by_an_extra_one(tmp_path) -> None:
    """Seed 1 of `t` is missing while seeds 3-4 exist: the pilot is short (seeds 0-2 and no
    other), so what seed 3 scored cannot reach the plan. (Before, the pilot was the first three
    seeds found: 0, 2 and 3.)"""
    data = tmp_path / "data"
    rng = np.random.default_rng(0)
    ease = rng.uniform(0.2, 0.7, 80)
    for s in range(5):
        write_run(data, "c", s, np.clip(ease + rng.normal(0, 0.05, 80), 0, 1))
        if s != 1:
            write_run(data, "t", s, np.clip(ease + 0.1 + rng.normal(0, 0.05, 80), 0, 1))
    before = plan_of(data)
    write_run(data, "t", 3, np.zeros(80))  # seed 3 is not a pilot seed: it cannot move the plan
    assert plan_of(data) == before == {"t": cl.PILOT, "c": cl.PILOT}
    [v], _ = cl.verdicts(collect(data).runs, (claim(),), resamples=1, second=None)
    assert v.verdict == cl.INCONCLUSIVE and "arm t: 2 seeds of the 3 pilot seeds" in v.reason


def test_the_plan_is_capped_per_claim(tmp_path) -> None:
    data = tmp_path / "data"
    noisy_arms(data, range(3), shift=0.021)
    assert plan_of(data, claim(max_seeds=4)) == {"t": 4, "c": 4}


def test_a_methods_call_plans_a_shared_control_for_the_named_arms_comparisons(tmp_path) -> None:
    """Control c is read by t (capped at 4 seeds) and by u (which needs more). A call naming t
    and c plans c the 4 seeds t's comparison needs, not u's (intrinsic_long's rlvr_long, shared
    by three arms, got 10 seeds for a call that ran two of them); a named arm in no comparison
    whose arms are all named keeps the plan of every comparison (u alone: u's, not nothing)."""
    data = tmp_path / "data"
    noisy_arms(data, range(3), arms=("t", "c"), shift=0.021)
    noisy_arms(data, range(3), arms=("u", "c"), shift=0.021)
    pair = (claim(max_seeds=4), cl.Claim("y", "000", "Fig. 0", "u beats c", (("u", "c"),), KEY,
                                         "greater", min_effect=0.02))
    found, _ = cl.verdicts(collect(data).runs, pair, resamples=1, second=None)
    full = cl.seed_plan(found)
    assert full["c"] == full["u"] > full["t"] == 4
    assert cl.seed_plan(found, {"t", "c"}) == {**full, "c": 4}
    assert cl.seed_plan(found, {"u"}) == cl.seed_plan(found, {"t"}) == cl.seed_plan(found)
    assert cl.planned_seeds(collect(data).runs, "", pair, methods=["t", "c"])["c"] == 4


@pytest.mark.parametrize("setting", ["undecided", "holds", "fails"])
def test_a_claims_comparisons_are_planned_once_its_precondition_holds(tmp_path, setting) -> None:
    """Preconditions first: while the precondition (p beats q) is undecided only its arms get
    seeds; once it holds, the comparison (t beats c) gets the very plan it has without a
    precondition (numbers from the pilot either way); when it fails, the claim is not tested and
    its comparison's arms get nothing (0: they wait)."""
    data = tmp_path / "data"
    noisy_arms(data, range(3))  # t vs c: undecided on the pilot, more seeds planned
    precondition_pilot(data, setting)
    gated = claim(preconditions=(cl.Precondition("p beats q", "p", "q", KEY, min_effect=0.02),))
    [v], _ = cl.verdicts(collect(data).runs, (gated,), resamples=1, second=None)
    plan, alone = plan_of(data, gated), plan_of(data)
    assert alone["t"] > cl.PILOT
    if setting == "undecided":
        assert v.verdict == cl.INCONCLUSIVE and "then, if it holds: " in v.needs
        assert plan["p"] > cl.PILOT and plan["t"] == plan["c"] == 0  # they wait
    elif setting == "holds":
        assert v.preconditions[0].status == cl.HOLDS
        assert {a: plan[a] for a in ("t", "c")} == alone
    else:
        assert v.verdict == cl.NOT_TESTED and plan["t"] == plan["c"] == 0


def test_extra_runs_are_the_seeds_after_the_pilot_up_to_the_plan() -> None:
    assert cl.extra_runs({"rlme": 5, "rlvr": 3, "dro": 2}, [0, 1, 2]) == {
        "rlme-3": {"method": "rlme", "seed": 3}, "rlme-4": {"method": "rlme", "seed": 4}}
    assert cl.extra_runs({"a": 3}, [0]) == {"a-1": {"method": "a", "seed": 1},
                                            "a-2": {"method": "a", "seed": 2}}


# ------------------------------------------------------------------------------ params and DVC

def test_extra_runs_are_validated_against_the_study() -> None:
    raw = read_raw()
    ok = {**raw, "extra_runs": {"rlme-3": {"method": "rlme", "seed": 3}}}
    assert validate(ok).extra_runs["rlme-3"].seed == 3
    for bad, why in (({"rlme-4": {"method": "rlme", "seed": 3}}, "key must be <method>-<seed>"),
                     ({"nope-3": {"method": "nope", "seed": 3}}, "not in `methods`"),
                     ({"rlme-1": {"method": "rlme", "seed": 1}}, "is in `seeds` already"),
                     ({"rlme-3": {"method": "rlme", "seed": 3, "x": 1}}, "unknown key")):
        with pytest.raises(ParamsError, match=why):
            validate({**raw, "extra_runs": bad})
    # A preset that is another study (its own arms) does not carry the default study's extra runs.
    assert validate(ok, preset="hint_copier").extra_runs == {}
    assert validate(ok, preset="ci").extra_runs == ok_runs(ok)


def ok_runs(raw: dict) -> dict:
    return {k: validate(raw).extra_runs[k] for k in raw["extra_runs"]}


@pytest.fixture(scope="module")
def dvc_stages(tmp_path_factory) -> callable:
    """`dvc stage list` of the repository's dvc.yaml with a given `extra_runs`."""
    d = tmp_path_factory.mktemp("dvc")
    subprocess.run(["git", "init", "-q"], cwd=d, check=True)
    subprocess.run([str(Path(sys.executable).with_name("dvc")), "init", "-q"], cwd=d, check=True)
    shutil.copy(ROOT / "dvc.yaml", d / "dvc.yaml")

    def stages(extra: dict) -> dict[str, str]:
        shutil.copy(ROOT / "params.yaml", d / "params.yaml")
        studies.write_extra_runs(d / "params.yaml", extra)
        out = subprocess.run([str(Path(sys.executable).with_name("dvc")), "stage", "list",
                              "--name-only"], cwd=d, check=True, capture_output=True, text=True)
        return set(out.stdout.split())
    return stages


def test_dvc_runs_each_planned_seed_as_its_own_stage_pair(dvc_stages) -> None:
    none = dvc_stages({})
    assert not any("_extra@" in s for s in none) and "train@rlme-0" in none
    extra = cl.extra_runs({"rlme": 5}, [0, 1, 2])
    got = dvc_stages(extra)
    assert got - none == {"train_extra@rlme-3", "evaluate_extra@rlme-3",
                          "train_extra@rlme-4", "evaluate_extra@rlme-4"}


def test_the_default_base_build_is_unchanged_and_a_second_base_changes_only_its_seed(tmp_path) -> None:
    """build_base depends on data/runs/base/build.json: with the default params it is the very
    file dvc.lock recorded for the base of record (byte for byte), extra runs never touch it, and
    the second base (`default.seed1`) differs in the seed alone."""
    def build_bytes(params) -> bytes:
        write_json(tmp_path / "build.json", build_config(params))
        return (tmp_path / "build.json").read_bytes()

    default = build_bytes(load())
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]["build_base"]["deps"]
    recorded = next((d["md5"] for d in lock if d["path"] == "data/runs/base/build.json"), None)
    if recorded is not None:
        assert hashlib.md5(default).hexdigest() == recorded
    raw = read_raw()
    planned = {**raw, "extra_runs": cl.extra_runs({"rlme": 6, "rlvr": 6}, raw["seeds"])}
    assert build_bytes(validate(planned)) == default
    second = validate(studies.study_params(ROOT, None, studies.default_arms(ROOT), base_seed=1))
    a, b = build_config(load()), build_config(second)
    assert b["seed"] == 1 != a["seed"] and {**b, "seed": a["seed"]} == a


# ------------------------------------------------------------------------------ the pipeline step

def tracks_world(data: Path, seeds) -> None:
    """rlme and rlvr (claim rlme_tracks_rlvr) about 0.1 apart with spread between seeds: the
    power rule wants more than the pilot."""
    noisy_arms(data, seeds, arms=("rlme", "rlvr"), shift=0.08, seed=3)


def test_the_pipeline_writes_the_plan_into_params_and_only_the_plan(tmp_path, monkeypatch) -> None:
    from flows import pipeline as pl

    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    tracks_world(tmp_path / "data", range(3))
    monkeypatch.setattr(pl, "ROOT", tmp_path)
    lines: list[str] = []
    added = pl.extend_by_plan(load(tmp_path / "params.yaml"), lines.append)
    extra = read_raw(tmp_path / "params.yaml")["extra_runs"]
    planned = cl.planned_seeds(collect(tmp_path / "data").runs, "")
    n = planned["rlme"]
    assert planned["rlvr"] == n > cl.PILOT and set(planned) >= {"rlme", "rlvr"}
    assert extra == cl.extra_runs({"rlme": n, "rlvr": n}, [0, 1, 2])
    assert added == [f"{k}_extra@{key}" for key in extra for k in ("train", "evaluate")]
    assert lines[0].startswith("plan (default study, from the pilot seeds): ") and "adds rlme seeds 3" in lines[0]
    # Only the extra_runs block changed: every comment and key as committed.
    before = (ROOT / "params.yaml").read_text().splitlines()
    after = (tmp_path / "params.yaml").read_text().splitlines()
    assert [x for x in after if x not in before] == ["extra_runs:", *(
        f"  {k}: {{method: {v['method']}, seed: {v['seed']}}}" for k, v in extra.items())]
    assert [x for x in before if x not in after] == ["extra_runs: {}"]
    # The planned seeds ran, one of them wildly: the plan (and params.yaml) stay as they were.
    tracks_world(tmp_path / "data", range(3, n))
    write_run(tmp_path / "data", "rlme", n - 1, np.zeros(80))
    text = (tmp_path / "params.yaml").read_text()
    assert pl.extend_by_plan(load(tmp_path / "params.yaml"), lines.append) == added
    assert (tmp_path / "params.yaml").read_text() == text and "params.yaml" not in lines[-1]


def test_methods_extends_only_the_named_arms_by_plan(tmp_path, monkeypatch) -> None:
    """`make study ARGS='--methods rlme'` runs rlme's planned seeds, not only its pilot: the plan
    of the named arms is written, the other arms' `extra_runs` are kept as they were, and only
    the named arms' stages run."""
    from flows import pipeline as pl
    from tasks.studies import write_extra_runs

    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    tracks_world(tmp_path / "data", range(3))
    monkeypatch.setattr(pl, "ROOT", tmp_path)
    n = cl.planned_seeds(collect(tmp_path / "data").runs, "")["rlme"]
    assert n > cl.PILOT
    added = pl.extend_by_plan(load(tmp_path / "params.yaml"), lambda _: None, methods=["rlme"])
    assert read_raw(tmp_path / "params.yaml")["extra_runs"] == cl.extra_runs({"rlme": n}, [0, 1, 2])
    assert added == [f"{k}_extra@rlme-{s}" for s in range(3, n) for k in ("train", "evaluate")]
    # rlvr's planned seeds already in params (an earlier call): kept, and not run by this one.
    write_extra_runs(tmp_path / "params.yaml", cl.extra_runs({"rlvr": n}, [0, 1, 2]))
    again = pl.extend_by_plan(load(tmp_path / "params.yaml"), lambda _: None, methods=["rlme"])
    assert again == added
    assert read_raw(tmp_path / "params.yaml")["extra_runs"] == {
        **cl.extra_runs({"rlvr": n}, [0, 1, 2]), **cl.extra_runs({"rlme": n}, [0, 1, 2])}


def test_the_pilot_runs_first_and_the_planned_seeds_after_it() -> None:
    from flows import pipeline as pl

    graph = {"build_base": set(), "train@a-0": {"build_base"}, "evaluate@a-0": {"train@a-0"},
             "train_extra@a-3": {"build_base"}, "evaluate_extra@a-3": {"train_extra@a-3"},
             "report": {"evaluate@a-0", "evaluate_extra@a-3"}}
    pilot = [s for s in graph if not pl.is_extra(s) and s != "report"]
    assert pl.select(graph, stages=pilot) == ["build_base", "train@a-0", "evaluate@a-0"]
    assert pl.select(graph, stages=["train_extra@a-3", "evaluate_extra@a-3", "report"])[-1] == "report"
    assert pl.stage_kind("train_extra@a-3") == "train" and pl.is_extra("evaluate_extra@a-3")
    assert not pl.is_extra("train@a-0") and not pl.is_extra("report")


def test_the_plan_is_asked_again_until_it_adds_nothing(tmp_path) -> None:
    """A precondition's seeds first; once they ran and it holds, the comparison's seeds; then no
    new stage, and each stage ran once. The rounds' stage times add up in one file."""
    from flows import pipeline as pl

    pre = ["train_extra@p-3", "evaluate_extra@p-3"]
    comp = ["train_extra@t-3", "evaluate_extra@t-3"]
    ran: list[list[str]] = []

    def plan() -> list[str]:  # the precondition holds once its seed 3 has run
        return pre + comp if ran else pre

    def run(stages: list[str]) -> dict:
        ran.append(stages)
        return {s: {"action": "run"} for s in stages}

    assert pl.plan_rounds(plan, run) == {s: {"action": "run"} for s in pre + comp}
    assert ran == [pre, comp]
    total, part = tmp_path / "study.plan.json", tmp_path / "study.plan.round.json"
    for stage, wall in (("train_extra@p-3", 300.0), ("train_extra@t-3", 200.0)):
        pl.write_times(part, {stage: (1.0, wall)}, {stage: {"action": "run"}}, {}, wall + 1, 2)
        studies.merge_times(total, part)
    merged = json.loads(total.read_text())
    assert not part.exists() and merged["wall_seconds"] == 502.0
    assert merged["stages"] == {"train_extra@p-3": {"start_s": 1.0, "seconds": 299.0, "action": "run"},
                                "train_extra@t-3": {"start_s": 302.0, "seconds": 199.0, "action": "run"}}
    # The last round (the report's) finds them up to date: what ran them is kept.
    pl.write_times(part, {"train_extra@p-3": (0.0, 1.0)}, {"train_extra@p-3": {"action": "skip"}}, {}, 2.0, 2)
    studies.merge_times(total, part)
    merged = json.loads(total.read_text())
    assert merged["stages"]["train_extra@p-3"] == {"start_s": 1.0, "seconds": 299.0, "action": "run"}
    assert merged["wall_seconds"] == 504.0


@pytest.mark.parametrize("setting", ["undecided", "holds", "fails"])
def test_a_preset_study_trains_no_arm_before_its_claims_precondition_holds(tmp_path, monkeypatch,
                                                                           setting) -> None:
    """In a preset study's workspace, the arms only a gated claim's comparison reads (t, c) wait:
    the pilot leaves them out, and the plan runs their pilot seeds once the precondition (p beats
    q) holds on the pilot of p and q; while it is undecided or when it fails, none of them runs.
    The default study runs every arm (`make study` is what `dvc repro` runs)."""
    from types import SimpleNamespace

    from flows import pipeline as pl

    gated = cl.Claim("x", "000", "Fig. 0", "t beats c", (("s1/t", "s1/c"),), KEY, "greater",
                     min_effect=0.02, preconditions=(cl.Precondition("p beats q", "s1/p", "s1/q", KEY,
                                                                     min_effect=0.02),))
    real = cl.planned_seeds
    monkeypatch.setattr(cl, "planned_seeds", lambda runs, study, claims=(gated,), **kw: real(runs, study, claims, **kw))
    params = SimpleNamespace(methods=["p", "q", "t", "c", "other"], seeds=[0, 1, 2])
    workspace = tmp_path / studies.WORKSPACES / "s1"
    monkeypatch.setattr(pl, "ROOT", workspace)
    assert pl.waiting_arms(params) == {"t", "c"}
    graph = {"build_base": set(), **{f"train@{a}-{s}": {"build_base"} for a in params.methods for s in range(3)}}
    graph["report"] = set(graph) - {"build_base"}
    pilot = pl.select(graph, stages=[s for s in graph if s != "report"], leave_out={"t", "c"})
    assert {pl.arm_of(s) for s in pilot} == {None, "p", "q", "other"}
    assert pl.select(graph, stages=["report"], leave_out={"t", "c"}) == ["build_base", *pilot[1:], "report"]

    data = workspace / "data"
    precondition_pilot(data, setting)
    added = pl.extend_by_plan(params, lambda _: None, write=False, waiting={"t", "c"})
    woke = sorted(s for s in added if pl.arm_of(s) in ("t", "c"))
    if setting == "holds":
        assert woke == sorted(f"{k}@{a}-{s}" for a in "tc" for s in range(3) for k in ("train", "evaluate"))
    else:
        assert woke == []
    monkeypatch.setattr(pl, "ROOT", tmp_path)  # the default study
    assert pl.waiting_arms(params) == set()


def test_the_plan_reads_a_precondition_measured_in_another_studys_record(tmp_path, monkeypatch) -> None:
    """A default-study comparison (t beats c) whose precondition is measured in a preset's study
    (s1/p beats s1/q, recorded in studies/s1/): the plan reads that record as the report does,
    so the comparison gets its seeds once the precondition holds there, not 0 for want of it."""
    from flows import pipeline as pl

    gated = cl.Claim("x", "000", "Fig. 0", "t beats c", (("t", "c"),), KEY, "greater", min_effect=0.02,
                     preconditions=(cl.Precondition("p beats q", "s1/p", "s1/q", KEY, min_effect=0.02),))
    real = cl.planned_seeds
    monkeypatch.setattr(cl, "planned_seeds", lambda runs, study, claims=(gated,), **kw: real(runs, study, claims, **kw))
    noisy_arms(tmp_path / "data", range(3))
    alone = pl.study_plan(tmp_path, "", ["t", "c"], [0, 1, 2])[0]
    rng = np.random.default_rng(1)
    ease = rng.uniform(0.3, 0.6, 80)
    for s in range(3):
        write_run(tmp_path / "studies" / "s1" / "data", "q", s, ease)
        write_run(tmp_path / "studies" / "s1" / "data", "p", s, np.clip(ease + 0.3, 0, 1))
    planned = pl.study_plan(tmp_path, "", ["t", "c"], [0, 1, 2])[0]
    assert alone == {"t": 0, "c": 0} and planned["t"] == planned["c"] > cl.PILOT


def test_a_preset_studys_plan_reads_a_precondition_measured_on_the_default_arms(tmp_path) -> None:
    """A preset study's comparison (s1/t beats s1/c) gated by a precondition measured on the
    default study's arms (p beats q, the main checkout's data/): the plan, made in the study's
    workspace (.studies/s1/) or from the main checkout (a dry run), reads those runs as the
    report does. It gave the comparison 0 seeds (waiting) while the report said the precondition
    held: gates_and_filter_add's cot_reference arms, gated by the gates firing on arith."""
    from flows import pipeline as pl

    gated = cl.Claim("x", "000", "Fig. 0", "t beats c", (("s1/t", "s1/c"),), KEY, "greater",
                     min_effect=0.02, preconditions=(cl.Precondition("p beats q", "p", "q", KEY,
                                                                     min_effect=0.02),))
    workspace = tmp_path / studies.WORKSPACES / "s1"
    noisy_arms(workspace / "data", range(3))
    real = cl.planned_seeds
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cl, "planned_seeds", lambda runs, study, claims=(gated,), **kw: real(runs, study, claims, **kw))
        alone = pl.study_plan(workspace, "s1", ["t", "c"], [0, 1, 2])[0]
        precondition_pilot(tmp_path / "data", "holds")
        planned = pl.study_plan(workspace, "s1", ["t", "c"], [0, 1, 2])[0]
        dry = pl.study_plan(tmp_path, "s1", ["t", "c"], [0, 1, 2], workspace / "data")[0]
    assert alone == {"t": 0, "c": 0}
    assert planned == dry and planned["t"] == planned["c"] > cl.PILOT


def test_dry_run_prints_a_study_plan_and_writes_nothing() -> None:
    """`--dry-run --study hint_copier` reads the study's record (studies/hint_copier/) and prints
    its plan and cost; nothing runs, params.yaml is not touched."""
    before = (ROOT / "params.yaml").read_bytes()
    r = subprocess.run([sys.executable, "-m", "flows.pipeline", "--dry-run", "--study", "hint_copier"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("plan (hint_copier study, from the pilot seeds): "), r.stdout
    assert (ROOT / "params.yaml").read_bytes() == before
    r = subprocess.run([sys.executable, "-m", "flows.pipeline", "--dry-run", "--study", "hint_copier",
                        "--methods", "rlvr"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    head = r.stdout.splitlines()[0]
    assert head.startswith("plan (hint_copier study, from the pilot seeds): rlvr ") and "rlme" not in head, head
    r = subprocess.run([sys.executable, "-m", "flows.pipeline", "--base-seed", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "error: --base-seed names the second base of a study" in r.stderr


def test_the_longest_recorded_training_starts_first(tmp_path) -> None:
    """Stages of one depth start longest-recorded first (a long training started last runs alone
    at the end of a two-slot run); evaluations still come before new trainings."""
    from flows.pipeline import deepest_first, recorded_seconds, write_times

    write_times(tmp_path / "quick.json", {"train@rlvr-0": (0.0, 300.0), "train@rationale-0": (0.0, 800.0),
                                          "prepare": (0.0, 1.0)},
                {"train@rlvr-0": {"action": "run"}, "train@rationale-0": {"action": "run"},
                 "prepare": {"action": "skip"}}, {}, 800.0, 2)
    write_times(tmp_path / "study.json", {"train@rlvr-0": (0.0, 400.0)},
                {"train@rlvr-0": {"action": "run"}}, {}, 400.0, 2)
    (tmp_path / "broken.json").write_text("{not json")
    seconds = recorded_seconds(tmp_path)
    assert seconds == {"train@rlvr-0": 400.0, "train@rationale-0": 800.0}  # an up-to-date stage says nothing
    ready = ["train@rlvr-0", "train@rationale-0", "evaluate@dro-0"]
    depth = {"train@rlvr-0": 1, "train@rationale-0": 1, "evaluate@dro-0": 2}
    assert deepest_first(ready, depth, seconds) == ["evaluate@dro-0", "train@rationale-0", "train@rlvr-0"]
    # A study after `make run` (seed 0 recorded): the other seeds cost what their method's seed 0
    # did, so each arm's pilot seeds run together and a study stopped half way has whole arms.
    ready = [f"train@{m}-{s}" for m in ("rlvr", "rationale") for s in range(3)]
    assert deepest_first(ready, dict.fromkeys(ready, 1), seconds) == [
        "train@rationale-0", "train@rationale-1", "train@rationale-2", "train@rlvr-0", "train@rlvr-1", "train@rlvr-2"]


def test_the_base_is_evaluated_before_the_next_training() -> None:
    """Once the base is built, its evaluation (short, read by every claim against the base) starts
    before any training of the real DAG, however deep the trainings sit: a study stopped half way
    keeps its base's evaluation."""
    from core.params import load
    from flows.pipeline import deepest_first, depths, select
    from tasks.stages import stage_graph

    graph = stage_graph()
    order = select(graph)
    depth = depths(graph, order)
    done = {s for s in graph if not s.startswith(("train", "evaluate"))} - {"report"}
    ready = [s for s in order if s not in done and s != "report" and graph[s] <= done]
    assert "evaluate_base" in ready and any(s.startswith("train@") for s in ready)
    # Every stage's last recorded time, the base's evaluation the shortest (as in reports/times/).
    # Its further draws (params base_draws) are evaluations of the base too: all of them first.
    base = [s for s in ready if s.startswith("evaluate_base")]
    assert len(base) == 1 + len(load().base_draws) > 1
    expected = {s: 90.0 if s in base else 300.0 for s in ready}
    assert sorted(deepest_first(ready, depth, expected)[:len(base)]) == sorted(base)


def test_a_methods_call_reports_without_running_the_other_arms(monkeypatch) -> None:
    """`make study ARGS='--methods rlme'`: after rlme's pilot and planned seeds, the report round
    brings up to date the report and rlme's stages only. It once passed no `methods`, so the report pulled
    in every arm's stages and retrained the whole study (every run stale after a code change)."""
    import logging

    from flows import pipeline as pl
    from tasks import tracking

    graph = {"build_base": set(), "train@rlme-0": {"build_base"}, "train@rlvr-0": {"build_base"},
             "train_extra@rlme-3": {"build_base"},
             "report": {"train@rlme-0", "train@rlvr-0", "train_extra@rlme-3"}}

    class Done:  # a stage future that has finished (nothing is up to date but the base)
        def __init__(self, stage: str) -> None:
            self.state = type("S", (), {"is_final": lambda _: True, "is_completed": lambda _: True,
                                        "message": "", "name": "Completed"})()
            self.stage = stage

        def result(self) -> dict:
            return {"action": "run"}

    ran: list[str] = []

    class Stage:
        def with_options(self, **_):
            return self

        def submit(self, stage: str, **_):
            ran.append(stage)
            return Done(stage)

    rounds: list[list[str]] = []

    def round_(**kw):  # each later round: the stages the pipeline would select for it
        rounds.append(pl.select(graph, kw.get("methods"), kw.get("seeds"), kw["stages"],
                                kw.get("leave_out") or ()))
        return {s: {"action": "run"} for s in rounds[-1]}

    plans = iter([["train_extra@rlme-3"], []])
    monkeypatch.setattr(pl.st, "stage_graph", lambda _root: graph)
    monkeypatch.setattr(pl, "get_run_logger", lambda: logging.getLogger("test"))
    monkeypatch.setattr(pl, "_parent_run", lambda *_: ("", {}))
    monkeypatch.setattr(tracking, "end_parent", lambda *a, **k: None)
    monkeypatch.setattr(pl, "_progress_artifact", lambda _n: None)
    monkeypatch.setattr(pl, "_show_progress", lambda *a, **k: None)
    monkeypatch.setattr(pl, "waiting_arms", lambda _p: set())
    monkeypatch.setattr(pl, "extend_by_plan", lambda *a, **k: next(plans))
    monkeypatch.setattr(pl, "run_stage", Stage())
    flow_fn = pl.pipeline.fn
    monkeypatch.setattr(pl, "pipeline", round_)
    flow_fn(methods=["rlme"], executor="local", max_parallel=2)
    assert ran == ["build_base", "train@rlme-0"]  # the pilot: rlme's stage and what it needs
    assert rounds == [["build_base", "train_extra@rlme-3"], ["build_base", "train@rlme-0",
                                                          "train_extra@rlme-3", "report"]]


def test_a_preset_studys_plan_costs_its_trainings_from_its_record(tmp_path, monkeypatch) -> None:
    """A preset study's runs have no training time in run.json; its record's times files have
    them, and the plan's cost counts them as the report does, not the evaluations alone."""
    from flows import pipeline as pl
    from flows.pipeline import write_times

    record = tmp_path / "studies" / "s1"
    noisy_arms(record / "data", range(3))
    gated = cl.Claim("x", "000", "Fig. 0", "t beats c", (("s1/t", "s1/c"),), KEY, "greater", min_effect=0.02)
    for arm in ("t", "c"):
        for s in range(3):
            path = record / "data" / "eval" / arm / f"seed{s}" / "metrics.json"
            write(path, {**json.loads(path.read_text()), "eval_seconds": 60.0})
    real = cl.planned_seeds
    monkeypatch.setattr(cl, "planned_seeds", lambda runs, study, claims=(gated,), **kw: real(runs, study, claims, **kw))
    planned, extra, cost = pl.study_plan(tmp_path, "s1", ["t", "c"], [0, 1, 2], record / "data")
    assert extra and "evaluations alone" in cost  # no times file: the evaluations are all it knows
    write_times(record / "times.json", {f"train@{a}-{s}": (0.0, 540.0) for a in "tc" for s in range(3)},
                {f"train@{a}-{s}": {"action": "run"} for a in "tc" for s in range(3)}, {}, 1700.0, 2)
    cost = pl.study_plan(tmp_path, "s1", ["t", "c"], [0, 1, 2], record / "data")[2]
    runs = len(extra)
    assert cost == f"{runs} more runs, about {runs * 600 / 3600:.1f} CPU-h (train + evaluate: committed stage times)"


def test_a_stage_with_a_recorded_time_gets_a_timeout_of_several_times_it(tmp_path) -> None:
    """The timeout catches a hung stage, not a slow one: a study's base build recorded at 73 min
    gets three times that in the study's workspace (its record's times), not the flat 90 min
    that killed a rebuild running beside a CI rehearsal three quarters through; a stage with no
    recorded time, and the default study's workspace, keep params' limit."""
    from flows import pipeline as pl

    record = tmp_path / "studies" / "s1"
    write(record / "times.json", {"stages": {"build_base": {"action": "run", "seconds": 4356.3},
                                             "evaluate_base": {"action": "skip", "seconds": 9000.0}}})
    seen = pl.study_seconds(tmp_path / studies.WORKSPACES / "s1")
    assert seen == {"build_base": 4356.3}
    assert pl.stage_timeout("build_base", 5400, seen) == pytest.approx(3 * 4356.3)
    assert pl.stage_timeout("evaluate_base", 5400, seen) == 5400
    assert pl.study_seconds(tmp_path) == {}


def test_the_worked_examples_of_the_pipeline_modules_pass() -> None:
    """flows/ is outside pyproject's doctest paths: the scheduling, plan and check modules' worked
    examples (flows/pipeline_*.py) run here."""
    import doctest

    from flows import pipeline, pipeline_checks, pipeline_plan, pipeline_schedule

    for module in (pipeline, pipeline_checks, pipeline_plan, pipeline_schedule):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
    assert doctest.testmod(pipeline_schedule).attempted >= 10 and doctest.testmod(pipeline_plan).attempted >= 5
