"""A preset's own study: its arms on its own base, in a workspace of its own, recorded in git.

Some claims can only show on another base (params `presets.<preset>`: a world setting and the SFT
that teaches it, e.g. a base that sometimes copies a planted hint). Such a study cannot run in
the default workspace: every stage writes under `data/`, so the preset's base would replace the
default study's. `python -m flows.pipeline --study <preset>` runs it instead in
`.studies/<preset>/`, a git worktree of the committed HEAD whose params.yaml selects the preset
and its arms (`presets.<preset>.methods`), with the same pipeline (the DVC DAG scheduled by
Prefect, runs in the same MLflow store), like `dvc exp run --temp` but kept between calls. Its
results of record are copied into `studies/<preset>/` (in git):

- `dvc.lock`: what DVC ran there, every stage's inputs and outputs by hash;
- `data/eval/{base,<arm>/seed<S>}/{metrics,items}.json`, `data/plots/<arm>/seed<S>/*.json` and
  `data/base_model_info.json`, the same files as the default study's under `data/`;
- `study.json`: the preset, its arms and seeds, the commit the workspace ran, and whether the
  pipeline finished (a partial run is recorded too: nothing already done is lost).

The workspace keeps its models and data (ignored by git), so the next call resumes: the worktree
moves to HEAD, the record is laid back into it, and DVC re-runs only what changed. The report
stage reads `studies/*/` as runs named `<preset>/<arm>` (flows/report_collect.py), which is how
evals/claims.yaml names them.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from core.io import read_json, write_json
from core.params import ROOT, ParamsError, load, read_raw
from tasks.stages import committed_revision, git, remove, run_command, stage_env

WORKSPACES = ".studies"
RECORDS = "studies"
# The results of record a study leaves under data/ (as in the default study: data/.gitignore).
_RECORDED = ("eval", "plots", "base_model_info.json")


def workspace(preset: str, root: Path = ROOT) -> Path:
    return root / WORKSPACES / preset


def record_dir(preset: str, root: Path = ROOT) -> Path:
    return root / RECORDS / preset


def study_presets(root: Path = ROOT) -> list[str]:
    """The presets that name arms of their own (`presets.<preset>.methods`): the claim settings."""
    presets = read_raw(root / "params.yaml").get("presets") or {}
    return sorted(k for k, v in presets.items() if isinstance(v, dict) and v.get("methods"))


def study_arms(preset: str, root: Path = ROOT) -> tuple[list[str], list[int]]:
    """The preset's arms (`presets.<preset>.methods`) and the study's seeds; a preset that names
    no arms of its own is refused (its study would be the default one, on another base)."""
    raw = read_raw(root / "params.yaml")
    own = (raw.get("presets") or {}).get(preset)
    if not isinstance(own, dict):
        raise ParamsError(f"preset {preset!r} is not defined; presets with a study: "
                          f"{study_presets(root)}")
    if not own.get("methods"):
        raise ParamsError(f"preset {preset!r} names no arms: set presets.{preset}.methods to run "
                          "its study")
    params = load(root / "params.yaml", preset=preset)  # the arms resolve on the preset
    return list(params.methods), list(params.seeds)


def study_params(root: Path, preset: str, methods: list[str]) -> dict:
    """params.yaml of the workspace: the repository's, with `preset` and `methods` set (DVC's
    stage matrix reads the top-level `methods`)."""
    raw = read_raw(root / "params.yaml")
    raw["preset"] = preset
    raw["methods"] = list(methods)
    return raw


def prepare(preset: str, root: Path = ROOT, log: Callable[[str], object] = print) -> dict:
    """Create or move `.studies/<preset>` to HEAD (committed code only), lay the last record back
    in, select the preset. Returns what `record` needs: preset, arms, seeds, commit."""
    methods, seeds = study_arms(preset, root)
    rev = committed_revision(root)
    ws = workspace(preset, root)
    if not ws.exists():
        ws.parent.mkdir(parents=True, exist_ok=True)
        git(["worktree", "prune"], root)  # a workspace deleted by hand leaves its registration
        git(["worktree", "add", "--detach", str(ws), rev], root)
        log(f"study {preset}: new workspace {ws.relative_to(root)} at {rev[:12]}")
    else:
        if not (ws / ".git").exists():
            raise ParamsError(f"{ws} exists but is not a git worktree of this repository; move it "
                              "away and run again")
        git(["checkout", "--force", "--detach", rev], ws)
        log(f"study {preset}: workspace {ws.relative_to(root)} moved to {rev[:12]}")
    # The worktree holds the default study's tracked results: the study's own replace them.
    for name in ("dvc.lock", *(f"data/{p}" for p in _RECORDED)):
        remove(ws / name)
    rec = record_dir(preset, root)
    if rec.exists():
        for name in ("dvc.lock", *(f"data/{p}" for p in _RECORDED)):
            _copy(rec / name, ws / name)
    (ws / "params.yaml").write_text(yaml.safe_dump(study_params(root, preset, methods),
                                                   sort_keys=False, allow_unicode=True),
                                    encoding="utf-8")
    # Phase 1 of the base SFT is shared by presets that keep its inputs; its stamp says so
    # (models/tiny.py, phase1_stamp), and a stale copy is simply rebuilt.
    phase1 = Path("data/work/sft/phase1")
    if (root / phase1 / "stamp").exists() and not (ws / phase1).exists():
        shutil.copytree(root / phase1, ws / phase1)
    return {"preset": preset, "methods": methods, "seeds": seeds, "commit": rev}


def run(preset: str, args: list[str], root: Path = ROOT, log: Callable[[str], object] = print,
        extra_env: dict[str, str] | None = None) -> int:
    """The pipeline in the workspace (`python -m flows.pipeline ARGS` there); its exit code."""
    from tasks import tracking

    # One MLflow store for every study: the workspace's runs land beside the default study's.
    env = stage_env(extra={"MLFLOW_TRACKING_URI": tracking.tracking_uri(), **(extra_env or {})})
    rc, _, _ = run_command([sys.executable, "-m", "flows.pipeline", *args], workspace(preset, root),
                           log, env=env)
    return rc


def record(study: dict, finished: bool, root: Path = ROOT) -> Path:
    """Copy the workspace's results of record into `studies/<preset>/` (replacing the last
    record, arm by arm), with `study.json`."""
    preset = study["preset"]
    ws, rec = workspace(preset, root), record_dir(preset, root)
    staging = rec.with_name(rec.name + ".new")
    remove(staging)
    staging.mkdir(parents=True)
    _copy(ws / "dvc.lock", staging / "dvc.lock")
    _copy(ws / "data" / "base_model_info.json", staging / "data" / "base_model_info.json")
    for kind, names in (("eval", ["base", *study["methods"]]), ("plots", study["methods"])):
        for name in names:
            for f in sorted((ws / "data" / kind / name).rglob("*.json")):
                if f.name in ("metrics.json", "headline.json", "items.json", "train.json", "heldout.json",
                              "test.json"):
                    _copy(f, staging / f.relative_to(ws))
    write_json(staging / "study.json", {**study, "finished": finished})
    remove(rec)
    staging.rename(rec)
    return rec


def recorded(root: Path = ROOT) -> dict[str, dict]:
    """Every recorded study: preset -> its study.json (unreadable ones are skipped)."""
    out: dict[str, dict] = {}
    for f in sorted((root / RECORDS).glob("*/study.json")):
        try:
            out[f.parent.name] = read_json(f)
        except (OSError, ValueError):
            continue
    return out


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    elif src.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
