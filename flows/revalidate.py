"""`make revalidate SINCE=<commit>`: keep the records of record current through a change that claims
unchanged numerics, by re-running canaries instead of every run.

A run's record is current when the run file `configure` writes for it at HEAD (its settings and the
digest of the code it imports, `core/codedeps.py`) is the one its study's dvc.lock recorded. A
change to shared code (a bug fix elsewhere, a refactor, a new digest) makes every run that imports
it outdated, though most such changes leave every number where it was. This command decides that
by evidence, per study (the default study's dvc.lock, and each record under studies/):

1. **Candidates.** The run files of SINCE and of HEAD are computed by each commit's own code (SINCE
   in a scratch git worktree, with the study.json of each study recorded after SINCE laid in:
   `lay_in_later_records`). A train or evaluate stage is a candidate when its record was current
   at SINCE and only its `code` digest differs at HEAD; a record already outdated at SINCE, or whose
   settings changed, is not one (it must train again).
2. **What really changed.** The Python files whose normalised source (`normalized_source`: comments,
   docstrings and formatting left out) differs between SINCE and HEAD.
3. **Canaries** (`configs/revalidate.yaml`, per study): declared runs among the candidates, trained
   and evaluated again through the pipeline in a scratch worktree of HEAD (with the base's
   evaluation), and compared with their records: every per-item score (`items.json`), every metric,
   every curve (train, held-out and test) and the training's record (`run.json`), wall times and the
   MLflow run id left out. Bitwise where the canary runs on the CPU kind that recorded the run
   (`machine` in run.json/metrics.json, `core.devices.cpu_kind`; a record without one is held to
   bitwise too); on another kind within the tolerances of `configs/revalidate.yaml`.
4. **Re-stamp or list.** If every canary of the study matches, each candidate whose changed files
   all lie in the import closure of some canary (the canaries ran every line that changed) gets its
   run file's new hash written into dvc.lock: it is current at HEAD, with the canaries' evidence
   committed beside (`reports/revalidate.json`). A candidate running a changed file no canary ran,
   and every candidate of a study whose canary differed, is listed to retrain (exit 1).

`--dry-run` prints the plan (candidates, canaries, what each would re-stamp) and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.codedeps import normalized_source
from core.params import ROOT
from tasks.stages import run_of
from tasks.studies import RECORDS

CONFIG = ROOT / "configs" / "revalidate.yaml"
OUT = ROOT / "reports" / "revalidate.json"
# Fields of a record that a re-run changes though its numbers do not.
VOLATILE = {"eval_seconds", "train_seconds", "run_id", "machine", "best_checkpoint"}
RUN_FILE = "data/runs/"

# Run in a checkout (SINCE's worktree, or HEAD's) with that checkout's own code: every study's run
# files, {study: {data/runs/...json: the file's content}}; with `closures`, the repository files each
# run file's stage imports. Uses only functions the lab has had since its records were kept.
SNIPPET = r"""
import json, sys
from core.params import ROOT, load, validate
from flows import configure
from tasks.studies import recorded, study_params
from evals.claims import parse_study

want_closures = sys.argv[1] == "closures"
def files(params, methods):
    out = {"data/runs/base/evaluate.json": {"config": configure.evaluate_config(params, None)}}
    for m in methods:
        try:
            run = params.resolve(m)
            out[f"data/runs/{m}/train.json"] = {"config": configure.train_config(params, run)}
            out[f"data/runs/{m}/evaluate.json"] = {"config": configure.evaluate_config(params, m)}
        except Exception:
            continue
        if want_closures:
            from core.codedeps import closure
            rel = lambda entries: sorted(str(p.relative_to(ROOT)) for p in closure(entries))
            out[f"data/runs/{m}/train.json"]["closure"] = rel(configure.train_code(run))
            out[f"data/runs/{m}/evaluate.json"]["closure"] = rel(configure.evaluate_code(params, m))
    if want_closures:
        out["data/runs/base/evaluate.json"]["closure"] = sorted(
            str(p.relative_to(ROOT)) for p in closure(configure.evaluate_code(params, None)))
    return out

params = load(ROOT / "params.yaml")
found = {"default": files(params, list(params.methods))}
for name, study in recorded(ROOT).items():
    preset, base_seed = parse_study(name)
    methods = list(study.get("methods") or [])
    try:
        p = validate(study_params(ROOT, preset or None, methods, base_seed), f"studies/{name}",
                     preset or None)
    except Exception:
        continue
    found[name] = files(p, methods)
json.dump(found, sys.stdout)
"""


class RevalidateError(RuntimeError):
    """A one-line reason the command cannot decide (exit 2)."""


def config_bytes(config: dict) -> bytes:
    """A run file's bytes as `configure` writes them (core.io.write_json)."""
    return json.dumps(config, indent=2, sort_keys=True).encode("utf-8")


def md5(config: dict) -> str:
    import hashlib

    return hashlib.md5(config_bytes(config)).hexdigest()


def git(*args: str, cwd: Path = ROOT) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RevalidateError(f"git {' '.join(args)}: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


def run_files(root: Path, closures: bool = False) -> dict[str, dict[str, dict]]:
    """SNIPPET's answer for the checkout at `root`, computed by that checkout's code."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-c", SNIPPET, "closures" if closures else "configs"],
                       cwd=root, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RevalidateError(f"computing the run files in {root} failed: "
                              f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(r.stdout)


def lay_in_later_records(root: Path, tree: Path) -> list[str]:
    """Lay into `tree` (SINCE's checkout) the study.json of each study recorded at `root` (HEAD)
    but not in `tree`, so that SINCE's code computes its run files too; the names laid in.

    A study's record is often committed after the commit whose code made it (a study runs for an
    hour while other work lands). Without its study.json SINCE's tree does not know the study, and
    every run of it read as "already outdated at SINCE" though SINCE's code made it. With it, a
    run whose recorded run file is the one SINCE's code writes is current at SINCE, as it was
    when it ran; a record made by other code still matches nothing there.

    >>> import tempfile
    >>> head, old = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> for name, where in (("a", head), ("b", head), ("b", old)):
    ...     (where / "studies" / name).mkdir(parents=True)
    ...     _ = (where / "studies" / name / "study.json").write_text(f'{{"at": "{where.name}"}}')
    >>> lay_in_later_records(head, old)
    ['a']
    >>> json.loads((old / "studies" / "b" / "study.json").read_text())["at"] == old.name
    True
    """
    laid = []
    for f in sorted((root / RECORDS).glob("*/study.json")):
        dst = tree / RECORDS / f.parent.name / "study.json"
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(f.read_bytes())
            laid.append(f.parent.name)
    return laid


def changed_code(since: str, head: str | None = "HEAD", root: Path = ROOT) -> list[str]:
    """The Python files whose normalised source differs between two commits (`head` None: the
    working tree), added and deleted files included: what a canary has to have run."""
    out = []
    for path in git("diff", "--name-only", since, *([head] if head else []), "--", "*.py",
                    cwd=root).splitlines():
        def at(rev: str | None, path: str = path) -> bytes | None:
            if rev is None:
                return (root / path).read_bytes() if (root / path).is_file() else None
            r = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True,
                               check=False)
            return r.stdout if r.returncode == 0 else None

        old, new = at(since), at(head)
        try:
            same = old is not None and new is not None and normalized_source(old) == normalized_source(new)
        except (SyntaxError, ValueError):
            same = False
        if not same:
            out.append(path)
    return sorted(out)


@dataclass
class Stage:
    """One train/evaluate stage of a study's dvc.lock and what revalidation makes of it."""

    name: str            # dvc.lock's stage name, e.g. train@rlvr-0
    run_file: str        # data/runs/<method>/train.json
    verdict: str = ""    # current | outdated | settings | candidate | restamp | retrain
    why: str = ""
    changed: list[str] = field(default_factory=list)  # really changed files it imports
    lock_md5: str | None = None  # the run file's md5 as dvc.lock recorded it


def lock_stages(lock: Path) -> list[Stage]:
    """The stages of `lock` that depend on a run file."""
    data = yaml.safe_load(lock.read_text(encoding="utf-8")) or {}
    out = []
    for name, st in (data.get("stages") or {}).items():
        for dep in st.get("deps") or []:
            if str(dep.get("path", "")).startswith(RUN_FILE) and name.startswith(("train", "evaluate")):
                out.append(Stage(name, dep["path"], lock_md5=dep.get("md5")))
    return out


def classify(stages: list[Stage], since: dict[str, dict], head: dict[str, dict],
             changed: list[str]) -> None:
    """Each stage's verdict before any canary runs (see the module's steps 1 and 2)."""
    for s in stages:
        recorded_md5 = s.lock_md5
        old, new = since.get(s.run_file), head.get(s.run_file)
        if new is None:
            s.verdict, s.why = "unknown", "HEAD no longer defines this run"
        elif md5(new["config"]) == recorded_md5:
            s.verdict = "current"
        elif old is None or md5(old["config"]) != recorded_md5:
            s.verdict, s.why = "outdated", "already outdated at SINCE"
        elif {k: v for k, v in old["config"].items() if k != "code"} != \
                {k: v for k, v in new["config"].items() if k != "code"}:
            s.verdict, s.why = "settings", "its settings changed"
        else:
            s.verdict = "candidate"
            s.changed = sorted(set(new.get("closure") or []) & set(changed))


def restamp(lock: Path, stamps: dict[str, tuple[str, int]]) -> int:
    """Write each stage's new run-file hash and size (`stamps`: stage -> (md5, size)) into
    dvc.lock, editing only those two lines of each entry (DVC's own formatting is kept).
    Returns how many entries changed.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "dvc.lock"
    >>> _ = d.write_text("schema: '2.0'\\nstages:\\n  train@a-0:\\n    deps:\\n"
    ...     "    - path: data/runs/a/train.json\\n      hash: md5\\n      md5: old\\n      size: 9\\n"
    ...     "  train@b-0:\\n    deps:\\n    - path: data/runs/b/train.json\\n      hash: md5\\n"
    ...     "      md5: keep\\n      size: 9\\n")
    >>> restamp(d, {"train@a-0": ("new", 12)})
    1
    >>> yaml.safe_load(d.read_text())["stages"]["train@a-0"]["deps"][0]["md5"], "keep" in d.read_text()
    ('new', True)
    """
    lines = lock.read_text(encoding="utf-8").splitlines(keepends=True)
    stage, in_run_file, n = "", False, 0
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.startswith("   ") and line.rstrip().endswith(":"):
            stage, in_run_file = line.strip()[:-1], False
        elif line.startswith("    - path: "):
            in_run_file = stage in stamps and line.split(": ", 1)[1].strip().startswith(RUN_FILE)
        elif in_run_file and line.startswith("      md5: "):
            lines[i] = f"      md5: {stamps[stage][0]}\n"
            n += 1
        elif in_run_file and line.startswith("      size: "):
            lines[i] = f"      size: {stamps[stage][1]}\n"
    lock.write_text("".join(lines), encoding="utf-8")
    return n


# --- canaries ------------------------------------------------------------------------------------

def _read(path: Path):
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def numbers(d: dict | None) -> dict[str, float]:
    """The numeric fields of a record, volatile ones (wall times, ids) left out."""
    return {k: float(v) for k, v in (d or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in VOLATILE}


def compare(recorded: Path, rerun: Path, method: str, seed: int | None, tol: float = 0.0,
            curve_tol: float = 0.0) -> dict:
    """A rerun (a checkout's root) against the record (another root), one run (`base` with seed
    None: the base's evaluation). `tol`/`curve_tol` 0: bitwise. `matches` says whether every
    per-item score, metric and curve agrees.

    A change that adds measures still revalidates: a metric (`metrics_added`) or curve key
    (`curve_keys_added`, as `<curve>:<key>`) present in the rerun but absent from the record is
    listed, not counted as a difference; every value the record holds must still be there and
    agree (a key the rerun lacks is a difference).

    >>> import tempfile
    >>> a, b = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> for root, x, item in ((a, 0.5, 1), (b, 0.5 + 1e-9, 0)):
    ...     (root / "data/eval/m/seed0").mkdir(parents=True)
    ...     _ = (root / "data/eval/m/seed0/metrics.json").write_text(json.dumps(
    ...         {"t/pass@1": x, "t/n": 2, "eval_seconds": x * 100}))
    ...     _ = (root / "data/eval/m/seed0/items.json").write_text(json.dumps(
    ...         {"t": {"ids": [1, 2], "metrics": {"c": [1, item]}}, "u": {"ids": [3]}}))
    >>> r = compare(a, b, "m", 0, tol=1e-6)
    >>> r["items_identical"], r["tasks_differing"], r["metrics_differing"], r["matches"]
    (False, ['t'], {}, False)
    >>> for root, late in ((a, 0.5), (b, 0.6)):
    ...     (root / "data/plots/m/seed0").mkdir(parents=True)
    ...     _ = (root / "data/plots/m/seed0/train.json").write_text(json.dumps(
    ...         [{"step": 5, "reward": 0.4}, {"step": 10, "reward": 0.4 + 1e-8}, {"step": 15, "reward": late}]))
    >>> compare(a, b, "m", 0, curve_tol=1e-5)["curve_first_differing_step"]
    15.0
    >>> rows = [{"step": 5, "reward": 0.4}]
    >>> for root, extra in ((a, {}), (b, {"urlvr/reward_accuracy": 0.7})):
    ...     _ = (root / "data/plots/m/seed0/train.json").write_text(json.dumps([{**rows[0], **extra}]))
    ...     _ = (root / "data/eval/m/seed0/metrics.json").write_text(json.dumps({"t/pass@1": 0.5, **extra}))
    ...     _ = (root / "data/eval/m/seed0/items.json").write_text(json.dumps({"t": {"ids": [1]}}))
    >>> r = compare(a, b, "m", 0)
    >>> r["curve_keys_added"], r["metrics_added"], r["matches"]
    (['train:urlvr/reward_accuracy'], ['urlvr/reward_accuracy'], True)
    >>> compare(b, a, "m", 0)["matches"]  # the rerun lost a key the record holds
    False
    """
    name = method if seed is None else f"{method}/seed{seed}"
    where = Path("data") / "eval" / name
    old_items, new_items = _read(recorded / where / "items.json"), _read(rerun / where / "items.json")
    old_m, new_m = numbers(_read(recorded / where / "metrics.json")), numbers(_read(rerun / where / "metrics.json"))
    tasks = sorted(set(old_items or {}) | set(new_items or {}))
    differing = [t for t in tasks if (old_items or {}).get(t) != (new_items or {}).get(t)]
    # Keys only the rerun has are added measures (listed, not a difference); keys only the record
    # has are lost ones (a difference: the recorded value is gone).
    added = sorted(set(new_m) - set(old_m))
    metrics = {k: [old_m.get(k), new_m.get(k)] for k in sorted(old_m)
               if k not in new_m or abs(old_m[k] - new_m[k]) > tol}
    curve: dict[str, float] = {}
    curve_added: set[str] = set()
    rows = {}
    first = None  # the first logged training step whose reward differs: where the runs part
    if seed is not None:
        run_old = numbers(_read(recorded / "data" / "checkpoints" / name / "run.json"))
        run_new = numbers(_read(rerun / "data" / "checkpoints" / name / "run.json"))
        added += [f"run.json:{k}" for k in sorted(set(run_new) - set(run_old))]
        metrics.update({f"run.json:{k}": [run_old.get(k), run_new.get(k)] for k in sorted(run_old)
                        if k not in run_new or abs(run_old[k] - run_new[k]) > tol})
        for kind in ("train", "heldout", "test"):
            plots = Path("data") / "plots" / name / f"{kind}.json"
            old_c, new_c = _read(recorded / plots) or [], _read(rerun / plots) or []
            rows[kind] = [len(old_c), len(new_c)]
            # A key the recorded curve never holds is added; one it holds in some rows must
            # agree in every row (a value where the record has none is a difference too).
            kept = {k for row in old_c for k in numbers(row)}
            for old_row, new_row in zip(old_c, new_c):
                a, b = numbers(old_row), numbers(new_row)
                curve_added.update(f"{kind}:{k}" for k in set(b) - kept)
                for k in (set(a) | set(b)) & kept:
                    gap = abs(a[k] - b[k]) if k in a and k in b else float("inf")
                    curve[f"{kind}:{k}"] = max(curve.get(f"{kind}:{k}", 0.0), gap)
                if kind == "train" and first is None and \
                        abs(a.get("reward", 0.0) - b.get("reward", 0.0)) > curve_tol:
                    first = a.get("step")
    found = old_items is not None and new_items is not None
    curves_agree = all(v <= curve_tol for v in curve.values()) and all(a == b for a, b in rows.values())
    return {"run": name, "found": found, "items_identical": found and not differing,
            "tasks_differing": differing, "metrics_differing": metrics, "curve_rows": rows,
            "curve_max_abs_diff": {k: curve[k] for k in sorted(curve) if curve[k] > 0},
            "curve_first_differing_step": first,
            "metrics_added": added, "curve_keys_added": sorted(curve_added),
            "matches": found and not differing and not metrics and curves_agree}


def recorded_kind(root: Path, method: str, seed: int | None) -> str:
    """The CPU kind a run's record names (run.json, else metrics.json); '' when it names none."""
    name = method if seed is None else f"{method}/seed{seed}"
    for f in (root / "data" / "checkpoints" / name / "run.json", root / "data" / "eval" / name / "metrics.json"):
        kind = (_read(f) or {}).get("machine") if f.is_file() else None
        if kind:
            return str(kind)
    return ""


def pipeline_call(study: str, methods: list[str], seed: int) -> list[str]:
    """The pipeline command that trains and evaluates `methods` at `seed` in `study`."""
    from evals.claims import parse_study

    cmd = [sys.executable, "-m", "flows.pipeline", "--methods", *methods, "--seeds", str(seed),
           "--no-extend"]
    if study != "default":
        preset, base_seed = parse_study(study)
        cmd[3:3] = ["--study", preset or "default"] + ([] if base_seed is None else ["--base-seed", str(base_seed)])
    return cmd


def run_canaries(study: str, canaries: list[tuple[str, int]], worktree: Path, logfile: Path,
                 log: Callable[[str], object] = print) -> dict[int, float]:
    """Train and evaluate the canaries through the pipeline in `worktree` (HEAD), one pipeline call
    per seed; returns each seed's wall seconds."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    by_seed: dict[int, list[str]] = {}
    for method, seed in canaries:
        by_seed.setdefault(seed, []).append(method)
    walls = {}
    for seed, methods in sorted(by_seed.items()):
        cmd = pipeline_call(study, methods, seed)
        log(f"revalidate: {study}: {' '.join(cmd[1:])} in {worktree} (log: {logfile})")
        began = time.monotonic()
        with open(logfile, "a", encoding="utf-8") as f:
            rc = subprocess.run(cmd, cwd=worktree, env=env, stdout=f, stderr=subprocess.STDOUT,
                                check=False).returncode
        if rc != 0:
            raise RevalidateError(f"the pipeline failed for the canaries {methods} seed {seed} of "
                                  f"{study} (exit {rc}; its log: {logfile})")
        walls[seed] = round(time.monotonic() - began, 1)
    return walls


def record_root(root: Path, study: str) -> Path:
    return root if study == "default" else root / "studies" / study


def lock_of(root: Path, study: str) -> Path:
    return record_root(root, study) / "dvc.lock"


def load_config(path: Path = CONFIG) -> dict:
    cfg = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    if not isinstance(cfg, dict):
        raise RevalidateError(f"{path}: missing or not a mapping (canaries and tolerances)")
    return cfg


def parse_canary(name: str) -> tuple[str, int]:
    method, _, seed = name.partition("/seed")
    if not method or not seed.isdigit():
        raise RevalidateError(f"canary {name!r}: expected <method>/seed<S>, e.g. rlvr/seed0")
    return method, int(seed)


def main(argv: list[str] | None = None, log: Callable[[str], object] = print) -> int:
    ap = argparse.ArgumentParser(prog="python -m flows.revalidate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--since", required=True, help="the commit whose records were current")
    ap.add_argument("--studies", nargs="*", help="only these studies (default: all recorded)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; run and change nothing")
    ap.add_argument("--json", type=Path, default=OUT, help=f"the evidence file (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    try:
        return revalidate(args.since, args.studies, args.dry_run, args.json, log)
    except RevalidateError as e:
        log(f"revalidate: {e}")
        return 2


def revalidate(since: str, only: list[str] | None, dry_run: bool, out: Path,
               log: Callable[[str], object] = print) -> int:
    from core.devices import cpu_kind

    cfg = load_config()
    # git() strips the output, so the first line may have lost its status column's leading space
    dirty = [path for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
             if not (path := line.split(maxsplit=1)[-1]).startswith(("data/", "reports/", "studies/", "dvc.lock"))]
    if dirty and not dry_run:
        raise RevalidateError("commit first: the canaries run HEAD in a worktree: "
                              + ", ".join(dirty[:6]))
    head, since_rev = git("rev-parse", "HEAD"), git("rev-parse", since)
    changed = changed_code(since_rev, None if dry_run else head)
    log(f"revalidate: {len(changed)} Python files changed in what they run since {since_rev[:7]}: "
        + (", ".join(changed) or "none"))
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="revalidate-") as scratch:
        old_tree = Path(scratch) / "since"
        git("worktree", "add", "--quiet", "--detach", str(old_tree), since_rev)
        try:
            later = lay_in_later_records(ROOT, old_tree)
            if later:
                log(f"revalidate: recorded after {since_rev[:7]}, their run files computed by its "
                    f"code too: {', '.join(later)}")
            at_since = run_files(old_tree)
        finally:
            git("worktree", "remove", "--force", str(old_tree))
    at_head = run_files(ROOT, closures=True)
    studies = {s: lock_of(ROOT, s) for s in at_head if lock_of(ROOT, s).is_file()}
    if only:
        unknown = sorted(set(only) - set(studies))
        if unknown:
            raise RevalidateError(f"unknown studies {unknown}; recorded: {sorted(studies)}")
        studies = {s: p for s, p in studies.items() if s in only}
    kind, tol = cpu_kind(), cfg.get("tolerance") or {}
    evidence: dict = {"since": since_rev, "head": head, "machine": kind, "changed": changed,
                      "tolerance": tol, "recorded_after_since": later, "studies": {}}
    failed = False
    for study, lock in studies.items():
        stages = lock_stages(lock)
        classify(stages, at_since.get(study, {}), at_head[study], changed)
        candidates = [s for s in stages if s.verdict == "candidate"]
        declared = [parse_canary(c) for c in (cfg.get("canaries") or {}).get(study) or []]
        train_candidates = {run_of(s.name) for s in candidates if s.name.startswith("train")}
        canaries = [c for c in declared if c in train_candidates]
        covered: set[str] = set()
        for method, _seed in canaries:
            for f in (f"data/runs/{method}/train.json", f"data/runs/{method}/evaluate.json",
                      "data/runs/base/evaluate.json"):
                covered |= set(at_head[study].get(f, {}).get("closure") or [])
        report: dict[str, Any] = {"stages": len(stages), "canaries": [f"{m}/seed{s}" for m, s in canaries],
                  "by_verdict": {}}
        if dry_run:  # what a passing set of canaries would re-stamp
            for s in candidates:
                missing = sorted(set(s.changed) - covered)
                s.why = ("not covered: " + ", ".join(missing)) if missing else "covered by the canaries"
        if candidates and not dry_run:
            if not canaries and any(s.changed for s in candidates):
                log(f"revalidate: {study}: no declared canary among its candidates "
                    f"({cfg_path_hint()}); its candidates are listed to retrain")
            results, walls = [], {}
            if canaries:
                with tempfile.TemporaryDirectory(prefix="revalidate-head-") as scratch:
                    wt = Path(scratch) / "head"
                    git("worktree", "add", "--quiet", "--detach", str(wt), head)
                    logfile = Path(tempfile.mkstemp(prefix="revalidate-", suffix=".log")[1])
                    try:
                        walls = run_canaries(study, canaries, wt, logfile, log)
                        for method, seed in [*canaries, ("base", None)]:
                            rec = record_root(ROOT, study)
                            same_kind = recorded_kind(rec, method, seed) in ("", kind)
                            t = (0.0, 0.0) if same_kind else (float(tol.get("metrics", 0.0)),
                                                              float(tol.get("curves", 0.0)))
                            results.append({**compare(rec, record_root(wt, study), method, seed, *t),
                                            "bitwise": same_kind, "recorded_machine":
                                            recorded_kind(rec, method, seed) or "unrecorded"})
                    finally:
                        git("worktree", "remove", "--force", str(wt))
            ok = all(r["matches"] for r in results)
            report.update({"canary_results": results, "wall_seconds": walls})
            for s in candidates:
                if not ok:
                    s.verdict, s.why = "retrain", "a canary's numbers differ"
                elif set(s.changed) - covered:
                    s.verdict, s.why = "retrain", "runs changed code no canary ran: " + \
                        ", ".join(sorted(set(s.changed) - covered))
                else:
                    s.verdict = "restamp"
            stamps = {s.name: (md5(at_head[study][s.run_file]["config"]),
                               len(config_bytes(at_head[study][s.run_file]["config"])))
                      for s in candidates if s.verdict == "restamp"}
            if stamps:
                restamp(lock, stamps)
            failed = failed or any(s.verdict == "retrain" for s in candidates)
        for s in stages:
            report["by_verdict"].setdefault(s.verdict, []).append(
                s.name + (f" ({s.why})" if s.why else ""))
        evidence["studies"][study] = report
        counts = {v: len(n) for v, n in report["by_verdict"].items()}
        log(f"revalidate: {study}: {counts}" + (f"; canaries {report['canaries']}" if canaries else ""))
    evidence["wall_seconds"] = round(time.monotonic() - began, 1)
    if dry_run:
        for study, report in evidence["studies"].items():
            for line in report["by_verdict"].get("candidate", []):
                log(f"  {study}: {line}")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(evidence, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    log(f"revalidate: evidence in {out}" + ("; runs to retrain listed there (retrain)" if failed else ""))
    return 1 if failed else 0


def cfg_path_hint() -> str:
    return f"{CONFIG.relative_to(ROOT)} names the canaries"


if __name__ == "__main__":
    sys.exit(main())
