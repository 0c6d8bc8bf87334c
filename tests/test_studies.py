"""A preset's own study (tasks/studies.py): its workspace is a git worktree of HEAD that selects the
preset and its arms, the last record is laid back in when it resumes, and only the study's results
of record are copied into studies/<preset>/. The pipeline itself is not run here (the slow suite
runs a study end to end: tests/test_orchestration.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from core.params import ROOT, ParamsError, read_raw
from flows.report_collect import collect_studies
from tasks import studies
from tasks.stages import StageFailed


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")


@pytest.fixture()
def repo(tmp_path) -> Path:
    """A repository with the real params.yaml and the default study's tracked results."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    shutil.copy(ROOT / ".gitignore", root / ".gitignore")
    (root / "code.py").write_text("x = 1\n")
    (root / "dvc.lock").write_text("schema: '2.0'\nstages:\n  prepare: {cmd: p}\n  build_base: {cmd: b}\n"
                                   "  train@rlvr-0: {cmd: t}\n  report: {cmd: r}\n")
    write(root / "data" / "eval" / "rlvr" / "seed0" / "metrics.json", {"arith/pass@1": 0.8})
    write(root / "data" / "eval" / "base" / "metrics.json", {"arith/pass@1": 0.4})
    write(root / "data" / "base_model_info.json", {"parameters": 5})
    write(root / "data" / "phase1_marker.json", {})
    # The default study's training record of a method that a study also names as an arm.
    write(root / "data" / "checkpoints" / "rlme" / "seed0" / "run.json", {"study": "default"})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-f", ".")
    git(root, "commit", "-qm", "start")
    return root


ARMS = read_raw(ROOT / "params.yaml")["presets"]["hint_copier"]["methods"]
WITH_STUDY = sorted(k for k, v in read_raw(ROOT / "params.yaml")["presets"].items() if v.get("methods"))


def test_the_workspace_selects_the_preset_and_drops_the_default_results(repo) -> None:
    info = studies.prepare("hint_copier", repo, log=lambda _: None)
    ws = repo / ".studies" / "hint_copier"
    assert info == {"preset": "hint_copier", "methods": ARMS, "seeds": [0, 1, 2],
                    "commit": git(repo, "rev-parse", "HEAD")}
    assert git(ws, "rev-parse", "HEAD") == info["commit"]
    raw = read_raw(ws / "params.yaml")
    assert raw["preset"] == "hint_copier" and raw["methods"] == ARMS
    assert raw["presets"] == read_raw(repo / "params.yaml")["presets"]  # the rest as committed
    assert raw["reward"]["rlme"]["questions"][0]["target"] == "YES"  # a string, not YAML 1.1's true
    # The default study's runs of its arms are not this study's: DVC must not take them as done.
    # Its record of the stages before the arms stays (DVC re-runs those the preset changes), with
    # the base's files: a preset that keeps the base does not build it again.
    lock = yaml.safe_load((ws / "dvc.lock").read_text())
    assert lock == {"schema": "2.0", "stages": {"prepare": {"cmd": "p"}, "build_base": {"cmd": "b"}}}
    assert sorted(str(p.relative_to(ws / "data")) for p in (ws / "data").rglob("*.json")) == [
        "base_model_info.json", "eval/base/metrics.json", "phase1_marker.json"]
    assert (ws / "code.py").read_text() == "x = 1\n"
    # The worktree is ignored by the repository's git (and the record is not).
    assert git(repo, "status", "--porcelain") == ""


def test_the_record_keeps_the_arms_and_a_resumed_study_gets_it_back(repo) -> None:
    info = studies.prepare("hint_copier", repo, log=lambda _: None)
    ws = studies.workspace("hint_copier", repo)
    (ws / "dvc.lock").write_text("schema: '2.0'\nstages: {study: {}}\n")
    write(ws / "data" / "base_model_info.json", {"parameters": 7})
    write(ws / "data" / "eval" / "base" / "metrics.json", {"arith/pass@1": 0.3})
    for seed in (0, 1):
        write(ws / "data" / "eval" / "rlme" / f"seed{seed}" / "metrics.json", {"arith_cf/cheat_rate": 0.1})
        write(ws / "data" / "eval" / "rlme" / f"seed{seed}" / "items.json", {})
        write(ws / "data" / "plots" / "rlme" / f"seed{seed}" / "heldout.json", [{"step": 0}])
    write(ws / "data" / "eval" / "dro" / "seed0" / "metrics.json", {"stale": 1})   # not an arm
    write(ws / "data" / "eval" / "rlme" / "seed0" / "notes.json", {})              # not a result
    write(ws / studies.TIMES_FILE, {"wall_seconds": 12.5, "stages": {}})          # this call's times
    rec = studies.record(info, finished=False, root=repo)

    assert rec == repo / "studies" / "hint_copier"
    files = sorted(str(p.relative_to(rec)) for p in rec.rglob("*") if p.is_file())
    assert files == ["data/base_model_info.json", "data/eval/base/metrics.json",
                     "data/eval/rlme/seed0/items.json", "data/eval/rlme/seed0/metrics.json",
                     "data/eval/rlme/seed1/items.json", "data/eval/rlme/seed1/metrics.json",
                     "data/plots/rlme/seed0/heldout.json", "data/plots/rlme/seed1/heldout.json",
                     "dvc.lock", "study.json", "times.calls.json", "times.json"]
    assert json.loads((rec / "study.json").read_text()) == {**info, "finished": False}
    assert json.loads((rec / "times.json").read_text())["wall_seconds"] == 12.5
    assert json.loads((rec / studies.CALLS_FILE).read_text()) == [
        {"commit": info["commit"], "times": {"wall_seconds": 12.5, "stages": {}}, "plan": None}]
    assert studies.recorded(repo) == {"hint_copier": {**info, "finished": False}}
    # The record is what git keeps.
    assert "studies/hint_copier/dvc.lock" in git(repo, "status", "--porcelain", "-uall")

    # The report reads it as runs named <preset>/<arm>.
    found = collect_studies(repo / "studies")
    assert sorted(found.runs) == ["hint_copier/base", "hint_copier/rlme"]
    assert sorted(found.runs["hint_copier/rlme"]) == [0, 1]
    assert found.runs["hint_copier/rlme"][0].metrics == {"arith_cf/cheat_rate": 0.1}

    # A new commit (the record with it), then the study resumes: the worktree moves to it and
    # the record comes back; a record that changes since is a result, not uncommitted code.
    (repo / "code.py").write_text("x = 2\n")
    git(repo, "add", "studies")
    git(repo, "commit", "-qam", "change")
    (rec / "study.json").write_text(json.dumps({**info, "finished": False, "edited": True}))
    shutil.rmtree(ws / "data" / "eval")
    again = studies.prepare("hint_copier", repo, log=lambda _: None)
    assert again["commit"] == git(repo, "rev-parse", "HEAD") != info["commit"]
    assert (ws / "code.py").read_text() == "x = 2\n"
    assert (ws / "dvc.lock").read_text() == "schema: '2.0'\nstages: {study: {}}\n"
    assert json.loads((ws / "data" / "eval" / "rlme" / "seed1" / "metrics.json").read_text()) == {
        "arith_cf/cheat_rate": 0.1}
    assert not (ws / "data" / "eval" / "rlvr").exists()  # neither the default study's results
    # nor its training records, which the checkout put back: rlme's would read as this study's
    # own output "modified", and a resumed call would retrain the runs its record holds.
    assert not (ws / "data" / "checkpoints" / "rlme" / "seed0" / "run.json").exists()
    assert not (ws / studies.TIMES_FILE).exists()  # nor the last call's times: this call writes its own
    # This call's record keeps the first call's times beside its own (the study's cost is both).
    write(ws / studies.TIMES_FILE, {"wall_seconds": 7.0, "stages": {}})
    rec = studies.record(again, finished=True, root=repo)
    assert json.loads((rec / "times.json").read_text())["wall_seconds"] == 7.0
    assert [(c["commit"], c["times"]["wall_seconds"]) for c in
            json.loads((rec / studies.CALLS_FILE).read_text())] == [(info["commit"], 12.5), (again["commit"], 7.0)]

    # A workspace deleted by hand is made again (git's stale registration pruned).
    shutil.rmtree(ws)
    studies.prepare("hint_copier", repo, log=lambda _: None)
    assert (ws / "dvc.lock").exists() and (ws / "code.py").read_text() == "x = 2\n"


def test_a_call_stopped_inside_a_plan_round_records_what_the_round_ran(repo) -> None:
    """The plan's rounds write their times to a round file merged at each round's end: a call
    stopped inside a round (by hand, or the session's end) still records the runs it did."""
    info = studies.prepare("hint_copier", repo, log=lambda _: None)
    ws = studies.workspace("hint_copier", repo)
    plan = ws / studies.TIMES_FILE.with_suffix(".plan.json")
    part = studies.round_times(plan)
    assert part.name == "study.plan.round.json"
    write(ws / studies.TIMES_FILE, {"wall_seconds": 100.0, "stages": {}})
    write(plan, {"wall_seconds": 50.0, "finished": True, "stages": {
        "train_extra@rlme-3": {"start_s": 1.0, "seconds": 40.0, "action": "run"}}})
    write(part, {"wall_seconds": 30.0, "finished": False, "stages": {
        "train_extra@rlme-4": {"start_s": 2.0, "seconds": 25.0, "action": "run"},
        "train_extra@rlme-5": {"start_s": 3.0, "seconds": None, "action": "running"}}})
    rec = studies.record(info, finished=False, root=repo)
    recorded = json.loads((rec / "times.plan.json").read_text())
    assert recorded["wall_seconds"] == 80.0 and recorded["finished"] is False
    assert recorded["stages"] == {
        "train_extra@rlme-3": {"start_s": 1.0, "seconds": 40.0, "action": "run"},
        "train_extra@rlme-4": {"start_s": 52.0, "seconds": 25.0, "action": "run"},
        "train_extra@rlme-5": {"start_s": 53.0, "seconds": None, "action": "running"}}
    (call,) = json.loads((rec / studies.CALLS_FILE).read_text())
    assert call["plan"] == recorded and not part.exists()
    # The next call starts with no round left over from this one.
    write(part, {"wall_seconds": 1.0, "stages": {}})
    studies.prepare("hint_copier", repo, log=lambda _: None)
    assert not part.exists() and not plan.exists()


def test_uncommitted_code_and_presets_without_arms_are_refused(repo) -> None:
    (repo / "code.py").write_text("x = 3\n")  # the workspace would not run this edit
    with pytest.raises(StageFailed, match="code.py"):
        studies.prepare("hint_copier", repo, log=lambda _: None)
    git(repo, "checkout", "-q", "code.py")
    with pytest.raises(ParamsError, match=re.escape(f"preset 'nope' is not defined; presets with a "
                                                    f"study: {WITH_STUDY}")):
        studies.prepare("nope", repo, log=lambda _: None)
    with pytest.raises(ParamsError, match="the default study runs in this workspace"):
        studies.prepare("default", repo, log=lambda _: None)
    with pytest.raises(ParamsError, match=r"preset 'ci' names no arms: set presets\.ci\.methods"):
        studies.prepare("ci", repo, log=lambda _: None)
    assert not (repo / ".studies").exists()


def test_a_stray_folder_in_the_workspace_place_is_not_overwritten(repo) -> None:
    stray = studies.workspace("hint_copier", repo)
    stray.mkdir(parents=True)
    (stray / "keep.txt").write_text("mine")
    with pytest.raises(ParamsError, match="not a git worktree"):
        studies.prepare("hint_copier", repo, log=lambda _: None)
    assert (stray / "keep.txt").read_text() == "mine"


def test_every_claim_setting_preset_names_a_study() -> None:
    """The presets the claims compare arms on are the ones with a study of their own."""
    from evals.claims import CLAIMS

    presets = {arm.split("/")[0] for c in CLAIMS for arm in c.arms if "/" in arm}
    with_study = {name for name, body in (read_raw()["presets"]).items() if body.get("methods")}
    assert presets and presets <= with_study


def test_a_second_base_is_the_same_study_with_another_base_seed(repo) -> None:
    """`default.seed1`: the default study's claim arms on a base built with seed 1, in a
    workspace and a record of its own; `hint_copier.seed1` the same for a preset. Nothing else in
    their params differs from the first base's study."""
    from evals.claims import CLAIMS

    info = studies.prepare("default.seed1", repo, log=lambda _: None)
    ws = repo / ".studies" / "default.seed1"
    raw, committed = read_raw(ws / "params.yaml"), read_raw(repo / "params.yaml")
    claim_arms = {a for c in CLAIMS if not c.blocked for a in (*c.arms, *c.precondition_arms)
                  if "/" not in a and a != "base"}
    assert set(info["methods"]) == claim_arms and info["methods"] == raw["methods"]
    assert info["methods"] == [m for m in committed["methods"] if m in claim_arms]  # their order
    assert (info["name"], info["base_seed"], info["preset"]) == ("default.seed1", 1, None)
    assert raw["seed"] == 1 and raw["preset"] is None and raw["extra_runs"] == {}
    assert {k: v for k, v in raw.items() if k not in ("seed", "methods")} == {
        k: v for k, v in committed.items() if k not in ("seed", "methods")}
    rec = studies.record(info, finished=True, root=repo)
    assert rec == repo / "studies" / "default.seed1"
    assert json.loads((rec / "study.json").read_text())["base_seed"] == 1

    second = studies.prepare("hint_copier.seed1", repo, log=lambda _: None)
    raw = read_raw(repo / ".studies" / "hint_copier.seed1" / "params.yaml")
    assert (raw["preset"], raw["seed"], raw["methods"]) == ("hint_copier", 1, ARMS)
    assert second["methods"] == ARMS and second["base_seed"] == 1


def test_a_study_keeps_the_seeds_its_plan_added_when_it_resumes(repo) -> None:
    """The workspace's params `extra_runs` (written by its pipeline from the plan) go into
    study.json, and a resumed study's workspace starts with them; the default study's own
    extra_runs never leak into a preset's workspace."""
    (repo / "params.yaml").write_text((repo / "params.yaml").read_text().replace(
        "extra_runs: {}", "extra_runs:\n  rlme-3: {method: rlme, seed: 3}"))
    git(repo, "commit", "-qam", "the default study's plan")
    info = studies.prepare("hint_copier", repo, log=lambda _: None)
    ws = studies.workspace("hint_copier", repo)
    assert read_raw(ws / "params.yaml")["extra_runs"] == {}
    planned = {f"{ARMS[0]}-3": {"method": ARMS[0], "seed": 3}, f"{ARMS[0]}-4": {"method": ARMS[0], "seed": 4}}
    assert studies.write_extra_runs(ws / "params.yaml", planned)
    rec = studies.record(info, finished=True, root=repo)
    assert json.loads((rec / "study.json").read_text())["extra_runs"] == planned
    studies.prepare("hint_copier", repo, log=lambda _: None)
    assert read_raw(ws / "params.yaml")["extra_runs"] == planned
    from core.params import load

    assert sorted(load(ws / "params.yaml").extra_runs) == sorted(planned)


def test_a_study_ships_its_own_base_and_a_fresh_workspace_starts_from_it(repo, monkeypatch) -> None:
    """A base the study built (its dvc.lock names another base than the repository's) goes into
    the record, and a workspace made anew (another machine) gets it back; the repository's own
    base of record is not copied; a rebuild stopped half way keeps the base the lock still names."""
    import tasks.stages

    def lock(ws: Path, md5: str) -> None:
        (ws / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"build_base": {
            "cmd": "b", "outs": [{"path": "data/base_model", "md5": md5}]}}}))

    info = studies.prepare("hint_copier", repo, log=lambda _: None)
    ws = studies.workspace("hint_copier", repo)
    write(ws / "data" / "base_model" / "config.json", {"weights": "its own"})
    lock(ws, "own.dir")
    here = {"hash": "own.dir"}  # what DVC says the workspace's base folder is
    monkeypatch.setattr(tasks.stages, "output_hash", lambda stage, path, root: here["hash"])
    rec = studies.record(info, finished=False, root=repo)
    assert json.loads((rec / "data" / "base_model" / "config.json").read_text()) == {"weights": "its own"}

    shutil.rmtree(ws)  # another machine: no workspace
    studies.prepare("hint_copier", repo, log=lambda _: None)
    assert json.loads((ws / "data" / "base_model" / "config.json").read_text()) == {"weights": "its own"}
    # A rebuild killed half way: the folder is not the base the lock names; the record keeps it.
    write(ws / "data" / "base_model" / "config.json", {"weights": "half built"})
    here["hash"] = None
    rec = studies.record(info, finished=False, root=repo)
    assert json.loads((rec / "data" / "base_model" / "config.json").read_text()) == {"weights": "its own"}
    # The repository's base of record (in git already) is not shipped again.
    lock(repo, "own.dir")
    assert studies.own_base(ws, rec, repo) is None
    rec = studies.record(info, finished=False, root=repo)
    assert not (rec / "data" / "base_model").exists()


@pytest.mark.slow
def test_a_preset_study_runs_through_the_pipeline_and_resumes(tmp_path) -> None:
    """`python -m flows.pipeline --study` in a clone: a micro preset with one arm builds its own
    base and trains it in .studies/, the record lands in studies/, and a second call finds every
    stage up to date."""
    import sys

    import yaml

    from tests.test_orchestration import make_clone, sh

    d = tmp_path / "repo"
    env = make_clone(d)
    raw = yaml.safe_load((d / "params.yaml").read_text())
    raw["presets"]["ci_study"] = {**raw["presets"]["ci"], "methods": ["rlvr"]}
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    sh("git commit -qam 'a study preset'", d, env)
    # The pilot only: what is tested is the study's workspace, record and resume, not the plan.
    cmd = [sys.executable, "-m", "flows.pipeline", "--study", "ci_study", "--no-extend"]

    def run_study() -> str:  # the flow's log (Prefect logs to stderr) and its output
        r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return r.stdout + r.stderr

    out = run_study()
    rec = d / "studies" / "ci_study"
    study = json.loads((rec / "study.json").read_text())
    assert study["methods"] == ["rlvr"] and study["seeds"] == [0] and study["finished"] is True
    metrics = json.loads((rec / "data" / "eval" / "rlvr" / "seed0" / "metrics.json").read_text())
    assert 0.0 <= metrics["arith/pass@1"] <= 1.0
    assert (rec / "data" / "eval" / "base" / "metrics.json").exists()
    lock = yaml.safe_load((rec / "dvc.lock").read_text())["stages"]
    assert {"build_base", "train@rlvr-0", "evaluate@rlvr-0"} <= set(lock)
    assert not (d / "data" / "base_model").exists()  # the default study's base was never built
    times = json.loads((rec / "times.json").read_text())  # the study's stage times, recorded too
    assert times["stages"]["train@rlvr-0"]["action"] == "run" and times["wall_seconds"] > 0
    # What git sees: the record, not the workspace.
    status = sh("git status --porcelain -uall", d, env)
    assert "studies/ci_study/study.json" in status and ".studies/" not in status
    # No default study here, so no report stage ran; the report reads the study's runs.
    assert "waits for the default study's evaluations" in out
    sh([sys.executable, "-m", "flows.report", "--no-mlflow"], d, env)
    alarms = json.loads((d / "reports" / "alarms.json").read_text())
    assert "ci_study/rlvr" in json.dumps(alarms)
    # Resuming: nothing left to run, and the record is the same.
    again = run_study()
    assert "train@rlvr-0: up to date" in again, again[-3000:]
    assert json.loads((rec / "times.json").read_text())["stages"]["train@rlvr-0"]["action"] == "skip"
    assert json.loads((rec / "study.json").read_text())["finished"] is True
    assert "study ci_study recorded in studies/ci_study (finished)" in out + again
    # On another machine (no workspace, no DVC cache: only the record in git), the study starts
    # from the base its record ships and keeps its recorded run instead of training it again.
    assert (rec / "data" / "base_model" / "model.safetensors").exists()
    shutil.rmtree(d / ".studies")
    shutil.rmtree(d / ".dvc" / "cache", ignore_errors=True)
    moved = run_study()
    assert "build_base: up to date" in moved and "train@rlvr-0: recorded" in moved, moved[-3000:]
    assert json.loads((rec / "times.json").read_text())["stages"]["train@rlvr-0"]["action"] == "recorded"
    kept = yaml.safe_load((rec / "dvc.lock").read_text())["stages"]
    assert {s: kept[s] for s in ("build_base", "train@rlvr-0", "evaluate@rlvr-0")} == {
        s: lock[s] for s in ("build_base", "train@rlvr-0", "evaluate@rlvr-0")}


@pytest.mark.slow
def test_a_preset_that_keeps_the_base_starts_from_the_committed_one(tmp_path) -> None:
    """A preset that changes no input of the base (here: longer trainings, as intrinsic_long)
    finds the default study's committed base up to date in its workspace: the study does not
    build a base of its own, and its runs are on the very base of record."""
    import sys

    from tests.test_orchestration import make_clone, sh

    d = tmp_path / "repo"
    env = make_clone(d)
    raw = yaml.safe_load((d / "params.yaml").read_text())
    ci = raw["presets"]["ci"]
    raw["presets"]["ci_longer"] = {**ci, "methods": ["rlvr"],
                                   "grpo": {**ci["grpo"], "max_steps": ci["grpo"]["max_steps"] + 1}}
    (d / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    dvc = str(Path(sys.executable).parent / "dvc")
    sh([dvc, "repro", "build_base"], d, env)  # the default study's base, committed as of record
    sh("git add -A && git commit -qm 'the base of record'", d, env)
    base = yaml.safe_load((d / "dvc.lock").read_text())["stages"]["build_base"]["outs"]

    r = subprocess.run([sys.executable, "-m", "flows.pipeline", "--study", "ci_longer", "--no-extend"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=1200)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "build_base: up to date" in out and "build_base: python -m flows.build_base" not in out, out[-4000:]
    lock = yaml.safe_load((d / "studies" / "ci_longer" / "dvc.lock").read_text())["stages"]
    assert lock["build_base"]["outs"] == base and "train@rlvr-0" in lock


def test_the_study_command_names_a_bad_preset_in_one_line() -> None:
    """`--study` with an unknown preset, or with options that do not apply, exits 2 with one
    `error:` line (a user error: nothing to retry)."""
    import sys

    run = [sys.executable, "-m", "flows.pipeline"]
    r = subprocess.run([*run, "--study", "hint_copier", "--stages", "report"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "error: --study runs the preset's own arms" in r.stderr
    # --methods picks some of the study's arms (the runs one claim needs), never another arm:
    # refused before its workspace is touched.
    r = subprocess.run([*run, "--study", "hint_copier", "--methods", "rlvr", "dro"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2 and errors == [
        "error: --methods ['dro'] are not arms of the study hint_copier; "
        f"its arms: {studies.study_arms('hint_copier', ROOT)[0]}"], r.stderr[-2000:]
    r = subprocess.run([*run, "--study", "nope"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: preset 'nope' is not defined; presets with a study: "
                      f"{WITH_STUDY}"], r.stderr[-2000:]


def test_a_call_stopped_while_a_stage_reran_keeps_what_the_last_record_held(repo) -> None:
    """DVC deletes a stage's outputs when it starts it: a call stopped while the base was rebuilt
    (or a run trained again) must not drop the base's info or that run from the record."""
    info = studies.prepare("hint_copier", repo, log=lambda _: None)
    ws = studies.workspace("hint_copier", repo)
    write(ws / "data" / "base_model_info.json", {"parameters": 7})
    for seed in (0, 1):
        write(ws / "data" / "eval" / "rlme" / f"seed{seed}" / "metrics.json", {"arith/pass@1": seed / 10})
        write(ws / "data" / "plots" / "rlme" / f"seed{seed}" / "train.json", [{"step": 0}])
    rec = studies.record(info, finished=False, root=repo)
    assert (rec / "data" / "base_model_info.json").is_file()

    # The next call: the base's rebuild and rlme seed 1's retraining are stopped half way.
    (ws / "data" / "base_model_info.json").unlink()
    (ws / "data" / "eval" / "rlme" / "seed1" / "metrics.json").unlink()
    shutil.rmtree(ws / "data" / "plots" / "rlme" / "seed1")
    write(ws / "data" / "eval" / "rlme" / "seed0" / "metrics.json", {"arith/pass@1": 0.5})  # rerun, done
    write(ws / "data" / "eval" / "dro" / "seed0" / "metrics.json", {"arith/pass@1": 0.9})   # not an arm
    rec = studies.record(info, finished=False, root=repo)
    assert json.loads((rec / "data" / "base_model_info.json").read_text()) == {"parameters": 7}
    assert json.loads((rec / "data" / "eval" / "rlme" / "seed1" / "metrics.json").read_text()) == {
        "arith/pass@1": 0.1}
    assert (rec / "data" / "plots" / "rlme" / "seed1" / "train.json").is_file()
    # What the call did finish replaces the record's; what is not an arm never enters it.
    assert json.loads((rec / "data" / "eval" / "rlme" / "seed0" / "metrics.json").read_text()) == {
        "arith/pass@1": 0.5}
    assert not (rec / "data" / "eval" / "dro").exists()
