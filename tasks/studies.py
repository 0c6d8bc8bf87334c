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
- `data/base_model/`: the study's own base, where its preset or base seed changes the base (7 MB;
  `own_base`), so a study resumed on another machine starts from the weights its runs were
  trained from (another CPU builds another base: every run would be stale);
- `study.json`: the preset, its arms and seeds, the commit the workspace ran, and whether the
  pipeline finished (a partial run is recorded too: nothing already done is lost);
- `times.json` (and `times.plan.json` for the seeds the plan added): each stage's wall time and
  what it did in this call (`run`, `skip`, ...), the call's wall time and the machine; a resumed
  study's times are those of the call that resumed it;
- `times.calls.json`: every call's times in order (`{"commit", "times", "plan"}` each), so a
  study run over several calls (a base built in one, seeds added in the next) keeps what each
  cost: docs/speed.md adds them up.

The workspace keeps its models and data (ignored by git), so the next call resumes: the worktree
moves to HEAD, the record is laid back into it, and DVC re-runs only what changed. On another
disk (a fresh clone, no workspace), a run whose record stands keeps it rather than training again
for its checkpoint (the pipeline's `--keep-recorded`, tasks/stages.py `recorded`). A study's first
call starts from the default study's record of the stages before the arms (`base_chain`), so a
preset that changes no input of the base (intrinsic_long: longer trainings) finds the committed
base and its evaluation up to date instead of building its own; one that does changes them, and
DVC rebuilds. The report
stage reads `studies/*/` as runs named `<preset>/<arm>` (flows/report_collect.py), which is how
evals/claims.yaml names them.

**A second base.** `<study>.seed<N>` (`hint_copier.seed1`, or `default.seed1` for the default
study's arms that the claims compare) is the same study on a base built with the top-level `seed`
= N (the base's SFT seed; flows/build_base.py), in `.studies/<study>.seed<N>/`, recorded in
`studies/<study>.seed<N>/`. The claims decide each claim on it too, never pooled with the first
base (evals/claims.py, `second_base`).

**Seeds by plan.** After a study's pilot (`seeds`), the pipeline asks the claims how many seeds
each arm needs (`plan`: the power rule on the pilot seeds alone, capped per claim) and writes the
seeds beyond the pilot as params `extra_runs` (`write_extra_runs`), which dvc.yaml turns into the
`train_extra@` / `evaluate_extra@` stages; study.json keeps them, so a resumed study has them.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from core.io import read_json, write_json
from core.params import ROOT, ParamsError, load, read_raw
from tasks.stages import UP_TO_DATE, committed_revision, git, remove, run_command, stage_env

WORKSPACES = ".studies"
RECORDS = "studies"
# The results of record a study leaves under data/ (as in the default study: data/.gitignore).
_RECORDED = ("eval", "plots", "base_model_info.json")
# The workspace pipeline's stage times (flows/pipeline.py `write_times`; the plan's extension
# writes `.plan.json` beside it), recorded as `times.json` and `times.plan.json`. Under
# reports/last_run/, where every pipeline call writes its times (ignored by git), not the default
# study's committed reports/times/, which the workspace's checkout keeps as it is.
TIMES_FILE = Path("reports") / "last_run" / "study.json"
_TIMES = ((TIMES_FILE, "times.json"), (TIMES_FILE.with_suffix(".plan.json"), "times.plan.json"))


def round_times(plan_times: Path) -> Path:
    """Where a plan round writes its stage times as it goes (`study.plan.round.json` beside
    `study.plan.json`), merged into the plan's at the round's end (`merge_times`), or by `record`
    when the call was stopped inside the round."""
    return plan_times.with_suffix(".round.json")


_ROUND = round_times(_TIMES[1][0])
# The files of an arm's run a record keeps (data/eval/<arm>/..., data/plots/<arm>/...).
RESULT_FILES = ("metrics.json", "headline.json", "items.json", "premises.json", "train.json", "heldout.json",
                "test.json")
CALLS_FILE = "times.calls.json"  # every call's times, in order, in the record
# A study's own base (a preset or base seed that changes the base's inputs) goes into its record
# too, in git like the default base of record: another CPU builds another base (docs/speed.md),
# so a study resumed on another machine must start from the very weights its runs were trained
# from, or every one of them is stale.
BASE = Path("data") / "base_model"


def workspace(name: str, root: Path = ROOT) -> Path:
    return root / WORKSPACES / name


def record_dir(name: str, root: Path = ROOT) -> Path:
    return root / RECORDS / name


def study_name(root: Path = ROOT) -> str:
    """The name of the study whose checkout `root` is: `.studies/<name>/` is a study's workspace,
    anything else the default study (`""`)."""
    root = Path(root).resolve()
    return root.name if root.parent.name == WORKSPACES else ""


def main_checkout(root: Path = ROOT) -> Path:
    """The checkout whose default study's `data/` sits beside `.studies/`: `root` itself, or
    the checkout a study's workspace `root` (`.studies/<name>/`) belongs to."""
    root = Path(root).resolve()
    return root.parent.parent if study_name(root) else root


def default_arms(root: Path = ROOT) -> list[str]:
    """The default study's arms that a claim compares or measures (evals/claims.yaml), in the
    order of params `methods`: the arms a second base of the default study runs."""
    from evals.claims import CLAIMS, is_base, study_of

    named = {a for c in CLAIMS if not c.blocked for a in (*c.arms, *c.precondition_arms)
             if study_of(a) == "" and not is_base(a)}
    return [m for m in load(root / "params.yaml").methods if m in named]


def study_presets(root: Path = ROOT) -> list[str]:
    """The presets that name arms of their own (`presets.<preset>.methods`): the claim settings."""
    presets = read_raw(root / "params.yaml").get("presets") or {}
    return sorted(k for k, v in presets.items() if isinstance(v, dict) and v.get("methods"))


def study_arms(name: str, root: Path = ROOT) -> tuple[list[str], list[int]]:
    """The study's arms (`presets.<preset>.methods`; for `default.seed<N>`, the default study's
    arms that the claims read) and its seeds; a preset that names no arms of its own is refused
    (its study would be the default one, on another base)."""
    from evals.claims import parse_study

    preset, base_seed = parse_study(name)
    if not preset:
        if base_seed is None:
            raise ParamsError("the default study runs in this workspace (make study); on a second "
                              "base it is `default.seed<N>`")
        return default_arms(root), list(load(root / "params.yaml").seeds)
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


def study_params(root: Path, preset: str | None, methods: list[str], base_seed: int | None = None,
                 extra: dict | None = None) -> dict:
    """params.yaml of the workspace: the repository's, with `preset` and `methods` set (DVC's
    stage matrix reads the top-level `methods`), the base's `seed` on a second base, and the
    study's own `extra_runs` (never the default study's)."""
    raw = read_raw(root / "params.yaml")
    raw["preset"] = preset
    raw["methods"] = list(methods)
    if base_seed is not None:
        raw["seed"] = base_seed
    raw["extra_runs"] = dict(extra or {})
    return raw


def prepare(name: str, root: Path = ROOT, log: Callable[[str], object] = print) -> dict:
    """Create or move `.studies/<name>` to HEAD (committed code only), lay the last record back
    in, select the preset (and the base seed of a `<study>.seed<N>`). Returns what `record`
    needs: preset, arms, seeds, commit (and name and base seed on a second base)."""
    from evals.claims import parse_study

    preset, base_seed = parse_study(name)
    methods, seeds = study_arms(name, root)
    rev = committed_revision(root)
    ws = workspace(name, root)
    if not ws.exists():
        ws.parent.mkdir(parents=True, exist_ok=True)
        git(["worktree", "prune"], root)  # a workspace deleted by hand leaves its registration
        git(["worktree", "add", "--detach", str(ws), rev], root)
        log(f"study {name}: new workspace {ws.relative_to(root)} at {rev[:12]}")
    else:
        if not (ws / ".git").exists():
            raise ParamsError(f"{ws} exists but is not a git worktree of this repository; move it "
                              "away and run again")
        git(["checkout", "--force", "--detach", rev], ws)
        log(f"study {name}: workspace {ws.relative_to(root)} moved to {rev[:12]}")
    # The worktree holds the default study's tracked results: the study's own replace them. A
    # study with no record yet keeps the default study's record of the stages before the arms
    # (`base_chain`): DVC re-runs each one whose inputs the preset changes and keeps the rest, so
    # a preset that keeps the default base (intrinsic_long) does not build and score it again.
    rec = record_dir(name, root)
    kept = {} if (rec / "dvc.lock").exists() else base_chain(ws)
    for f in ("dvc.lock", *(f"data/{p}" for p in _RECORDED), *(src for src, _ in _TIMES), _ROUND):
        remove(ws / f)  # the times too: a record never carries an earlier invocation's
    for f in default_run_records(ws):
        remove(ws / f)
    for rel, content in kept.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(content)
    extra: dict = {}
    if rec.exists():
        for f in ("dvc.lock", *(f"data/{p}" for p in _RECORDED)):
            _copy(rec / f, ws / f)
        if (rec / BASE).is_dir():  # the study's own base, shipped with its record
            remove(ws / BASE)
            _copy(rec / BASE, ws / BASE)
        extra = recorded_extra_runs(rec, methods, seeds)
    (ws / "params.yaml").write_text(yaml.safe_dump(study_params(root, preset or None, methods,
                                                                base_seed, extra),
                                                   sort_keys=False, allow_unicode=True),
                                    encoding="utf-8")
    # Phase 1 of the base SFT is shared by presets that keep its inputs; its stamp says so
    # (models/tiny.py, phase1_stamp), and a stale copy is simply rebuilt.
    phase1 = Path("data/work/sft/phase1")
    if (root / phase1 / "stamp").exists() and not (ws / phase1).exists():
        shutil.copytree(root / phase1, ws / phase1)
    info = {"preset": preset or None, "methods": methods, "seeds": seeds, "commit": rev}
    return info if name == preset else {**info, "name": name, "base_seed": base_seed}


def default_run_records(ws: Path) -> list[str]:
    """The default study's training records that git checks out into a workspace
    (data/checkpoints/<method>/seed<S>/run.json): the checkout resets them on every call, so they
    are never the study's own. Left in place, a study arm named like a default-study method
    (`format`, `random`) reads one as its own output, "modified" against the study's dvc.lock, and
    a resumed call (`keep_recorded`, tasks/stages.py) retrains a run its record holds."""
    listed = git(["ls-files", "--", "data/checkpoints"], ws)
    return [f for f in listed.splitlines() if f.endswith("/run.json")]


def base_chain(ws: Path) -> dict[str, bytes]:
    """The default study's record of the stages before the arms, as the worktree `ws` checked it
    out: its dvc.lock cut to the stages that are not a run of an arm (no `@`) nor the report,
    and the base's tracked files (data/base_model_info.json, data/eval/base/). Path -> content."""
    try:
        lock = yaml.safe_load((ws / "dvc.lock").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    stages = lock.get("stages") if isinstance(lock, dict) else None
    if not isinstance(stages, dict):
        return {}
    chain = {k: v for k, v in stages.items() if "@" not in k and k != "report"}
    out = {"dvc.lock": yaml.safe_dump({**lock, "stages": chain}, sort_keys=False).encode("utf-8")}
    base = [ws / "data" / "base_model_info.json", *sorted((ws / "data" / "eval" / "base").glob("*.json"))]
    out.update({str(f.relative_to(ws)): f.read_bytes() for f in base if f.is_file()})
    return out


def recorded_extra_runs(rec: Path, methods: list[str], seeds: list[int]) -> dict:
    """The `extra_runs` a study's record kept (study.json), those still valid for its arms and
    seeds: a resumed study starts with the seeds its plan added."""
    try:
        extra = read_json(rec / "study.json").get("extra_runs") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return {k: v for k, v in extra.items() if isinstance(v, dict) and v.get("method") in methods
            and v.get("seed") not in seeds and k == f"{v.get('method')}-{v.get('seed')}"}


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
    """Copy the workspace's results of record into `studies/<name>/` (replacing the last
    record, arm by arm), with `study.json` (and the `extra_runs` the plan added)."""
    name = study.get("name") or study["preset"]
    ws, rec = workspace(name, root), record_dir(name, root)
    staging = rec.with_name(rec.name + ".new")
    remove(staging)
    staging.mkdir(parents=True)
    _copy(ws / "dvc.lock", staging / "dvc.lock")
    _copy(ws / "data" / "base_model_info.json", staging / "data" / "base_model_info.json")
    base = own_base(ws, rec, root)
    if base is not None:
        _copy(base, staging / BASE)
    for rel in result_files(ws, study["methods"]):
        _copy(ws / rel, staging / rel)
    kept_from_last_record(rec, staging, ws, study["methods"])
    if (ws / _ROUND).exists():  # a call stopped inside a plan round: what the round did so far
        merge_times(ws / _TIMES[1][0], ws / _ROUND)
    for src, dst in _TIMES:
        _copy(ws / src, staging / dst)
    calls = recorded_calls(rec) + [{"commit": study.get("commit"), **{
        key: read_json(ws / src) if (ws / src).exists() else None
        for key, (src, _) in zip(("times", "plan"), _TIMES)}}]
    write_json(staging / CALLS_FILE, calls)
    extra = (read_raw(ws / "params.yaml") or {}).get("extra_runs") if (ws / "params.yaml").exists() else None
    write_json(staging / "study.json", {**study, **({"extra_runs": extra} if extra else {}),
                                        "finished": finished})
    remove(rec)
    staging.rename(rec)
    return rec


def merge_times(total: Path, part: Path) -> None:
    """Add a round's stage times (`part`, removed) to `total`: its stages after the ones already
    there (start times shifted by the wall time so far), the wall times added up, and whether the
    round `finished` (a round stopped by hand did not)."""
    new = read_json(part)
    if total.exists():
        old = read_json(total)
        shift = old["wall_seconds"]
        stages = dict(old["stages"])
        for s, v in new["stages"].items():
            # A later round that found a stage up to date does not hide the round that ran it.
            if v.get("action") in UP_TO_DATE and stages.get(s, {}).get("action") not in (None, *UP_TO_DATE):
                continue
            stages[s] = {**v, "start_s": round(v["start_s"] + shift, 1)}
        new = {**new, "wall_seconds": round(shift + new["wall_seconds"], 1), "stages": stages}
    write_json(total, new)
    part.unlink()


def result_files(folder: Path, methods: list[str]) -> list[Path]:
    """The arms' result files under a workspace or record `folder` (relative to it): the base's
    and each arm's evaluations, each arm's curves."""
    return [f.relative_to(folder) for kind, names in (("eval", ["base", *methods]), ("plots", methods))
            for arm in names for f in sorted((folder / "data" / kind / arm).rglob("*.json"))
            if f.name in RESULT_FILES]


def kept_from_last_record(rec: Path, staging: Path, ws: Path, methods: list[str]) -> list[Path]:
    """Copy into `staging` the last record's result files (the base's info, the arms' evaluations
    and curves) that the workspace no longer has: DVC deletes a stage's outputs when it starts
    it, so a call stopped while a stage re-ran (the base rebuilt, a run trained again) would
    otherwise drop what the record held, while the lock it copies still names it. Returns the
    files kept, relative to the record."""
    kept = []
    for rel in [Path("data") / "base_model_info.json", *result_files(rec, methods)]:
        if (rec / rel).is_file() and not (ws / rel).exists() and not (staging / rel).exists():
            _copy(rec / rel, staging / rel)
            kept.append(rel)
    return kept


def own_base(ws: Path, rec: Path, root: Path = ROOT) -> Path | None:
    """Where the base the study's dvc.lock names is, when it is the study's own (not the
    repository's base of record, already in git): the workspace's, when it is that very base; else
    the last record's (a rebuild stopped half way leaves the lock naming the base it replaced)."""
    from tasks.stages import output_hash

    named = _base_hash(ws / "dvc.lock")
    if named is None or named == _base_hash(root / "dvc.lock"):
        return None
    try:
        here = output_hash("build_base", BASE.as_posix(), ws)
    except Exception:  # noqa: BLE001 - no DVC project there: nothing of its own to ship
        here = None
    if here == named:
        return ws / BASE
    return rec / BASE if (rec / BASE).is_dir() else None


def _base_hash(lock: Path) -> str | None:
    """The hash a dvc.lock records for the base (`build_base`'s `data/base_model`), if any."""
    from evals.lineage import read_lock

    stage = read_lock(lock).get("build_base")
    outs = stage.get("outs") if isinstance(stage, dict) else None
    if not isinstance(outs, list):
        return None
    return next((o.get("md5") for o in outs if isinstance(o, dict) and o.get("path") == BASE.as_posix()),
                None)


def recorded_calls(rec: Path) -> list[dict]:
    """The calls a record already holds: its `times.calls.json`, or for a record made before that
    file existed, its one call's `times.json` (and plan) with the commit of its study.json."""
    if (rec / CALLS_FILE).exists():
        return list(read_json(rec / CALLS_FILE))
    if not (rec / "times.json").exists():
        return []
    commit = read_json(rec / "study.json").get("commit") if (rec / "study.json").exists() else None
    return [{"commit": commit, **{key: read_json(rec / dst) if (rec / dst).exists() else None
                                  for key, (_, dst) in zip(("times", "plan"), _TIMES)}}]


def unshipped_base(name: str, root: Path = ROOT) -> float | None:
    """For a study whose record names a base of its own (not the repository's) and ships none
    (recorded before records shipped their base, `own_base`): the wall seconds its base build took
    in the record's calls (0.0 when no call timed it), which the study's next call spends building
    it again, on a CPU that may build another one (then every recorded run of it is stale). None
    when the record ships its base, starts from the repository's, or does not exist.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> lock = "stages: {{build_base: {{outs: [{{path: data/base_model, md5: {}}}]}}}}"
    >>> _ = (root / "dvc.lock").write_text(lock.format("aaa.dir"))
    >>> rec = root / RECORDS / "s"; rec.mkdir(parents=True)
    >>> _ = (rec / "dvc.lock").write_text(lock.format("bbb.dir"))
    >>> _ = (rec / "times.json").write_text('{"stages": {"build_base": {"action": "run", "seconds": 4356.3}}}')
    >>> unshipped_base("s", root)
    4356.3
    >>> (rec / BASE).mkdir(parents=True); unshipped_base("s", root) is None
    True
    """
    rec = record_dir(name, root)
    named = _base_hash(rec / "dvc.lock")
    if named is None or named == _base_hash(root / "dvc.lock") or (rec / BASE).is_dir():
        return None
    return recorded_stage_seconds(rec).get("build_base", 0.0)


def recorded_stage_seconds(rec: Path) -> dict[str, float]:
    """Each stage's longest wall time over a record's calls (`recorded_calls`), stages that did
    something only (not `skip` or `not run`); {} for an unreadable record."""
    out: dict[str, float] = {}
    try:
        calls = recorded_calls(rec)
    except (OSError, ValueError):
        return out
    for times in (t for c in calls for t in (c.get("times"), c.get("plan")) if isinstance(t, dict)):
        stages = times.get("stages")
        for stage, t in stages.items() if isinstance(stages, dict) else ():
            if isinstance(t, dict) and t.get("action") not in ("skip", "not run") and t.get("seconds"):
                out[stage] = max(out.get(stage, 0.0), float(t["seconds"]))
    return out


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


# ------------------------------------------------------------------------------ seeds by plan

_EXTRA_BLOCK = re.compile(r"^extra_runs:[^\n]*\n(?:(?:[ \t]+[^\n]*|[ \t]*)\n)*?(?=\S|\Z)", re.M)


def write_extra_runs(params_file: Path, extra: dict[str, dict]) -> bool:
    r"""Set params.yaml's `extra_runs` to `extra`, leaving every other line (and comment) as it is;
    True if the file changed.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "params.yaml"
    >>> _ = f.write_text("# the arms\nmethods: [a]\n# planned\nextra_runs: {}\n\n# next\nx: 1\n")
    >>> write_extra_runs(f, {"a-3": {"method": "a", "seed": 3}})
    True
    >>> print(f.read_text(), end="")
    # the arms
    methods: [a]
    # planned
    extra_runs:
      a-3: {method: a, seed: 3}
    <BLANKLINE>
    # next
    x: 1
    >>> write_extra_runs(f, {}), read_raw(f)["extra_runs"]
    (True, {})
    """
    text = Path(params_file).read_text(encoding="utf-8")
    match = _EXTRA_BLOCK.search(text)
    if match is None:
        raise ParamsError(f"{params_file}: no top-level `extra_runs:` key to write the plan into")
    body = "".join(f"  {k}: {{method: {v['method']}, seed: {v['seed']}}}\n" for k, v in extra.items())
    block = ("extra_runs:\n" + body) if extra else "extra_runs: {}\n"
    trailing = match.group(0)[len(match.group(0).rstrip("\n")) + 1:]  # blank lines after the block
    new = text[:match.start()] + block + trailing + text[match.end():]
    if new == text:
        return False
    Path(params_file).write_text(new, encoding="utf-8")
    return True
