"""Train recorded runs again at HEAD and compare them with their record: does the code drift
that the report counts (`flows/report_collect.py`, `outdated_runs`) change a run?

    python -m benchmarks.rerun_record rlvr/seed0            # one training, two evaluations
    python -m benchmarks.rerun_record rlme/seed0 r3/seed0   # runs of one seed train side by side

For each run `<method>/seed<S>` of the default study, a git worktree of HEAD in a scratch folder
runs the pipeline for that run alone (`python -m flows.pipeline --methods M --seeds S`: the base
of record is in git, so the run trains, then it and the base are evaluated), and its results are
compared with the ones committed here: each task's per-item record (`items.json`) identical or
not, the metrics that differ by more than `TOL` (wall times left out), and the logged training
curve's largest difference per column. The worktree is removed afterwards; nothing here changes.
Writes the JSON record (default `benchmarks/results/rerun_record.json`; runs already in it that
this call did not rerun are kept, each with the commit it was rerun at) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.params import ROOT

TOL = 1e-6  # a float-order difference (another summation order) is not a different run
CURVE_TOL = 1e-5  # a logged mean over a window of steps: float order moves it by about 1e-7
TIMINGS = {"eval_seconds", "train_seconds"}
RUN = re.compile(r"^(?P<method>[\w.-]+)/seed(?P<seed>\d+)$")
OUT = ROOT / "benchmarks" / "results" / "rerun_record.json"


def _read(path: Path):
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _numbers(d: dict | None) -> dict[str, float]:
    return {k: float(v) for k, v in (d or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in TIMINGS}


def compare(recorded: Path, rerun: Path, method: str, seed: int | None) -> dict:
    """The rerun (a checkout's root) against the record (another checkout's root), one run
    (`base` with seed None: the base's evaluation, which has no curve).

    >>> import tempfile
    >>> a, b = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> for root, x, item in ((a, 0.5, 1), (b, 0.5 + 1e-9, 0)):
    ...     (root / "data/eval/m/seed0").mkdir(parents=True)
    ...     _ = (root / "data/eval/m/seed0/metrics.json").write_text(json.dumps(
    ...         {"t/pass@1": x, "t/n": 2, "eval_seconds": x * 100}))
    ...     _ = (root / "data/eval/m/seed0/items.json").write_text(json.dumps(
    ...         {"t": {"ids": [1, 2], "metrics": {"c": [1, item]}}, "u": {"ids": [3]}}))
    >>> r = compare(a, b, "m", 0)
    >>> r["items_identical"], r["tasks_differing"], r["metrics_differing"]
    (False, ['t'], {})
    >>> for root, late in ((a, 0.5), (b, 0.6)):
    ...     (root / "data/plots/m/seed0").mkdir(parents=True)
    ...     _ = (root / "data/plots/m/seed0/train.json").write_text(json.dumps(
    ...         [{"step": 5, "reward": 0.4}, {"step": 10, "reward": 0.4 + 1e-8}, {"step": 15, "reward": late}]))
    >>> compare(a, b, "m", 0)["curve_first_differing_step"]
    15.0
    """
    name = method if seed is None else f"{method}/seed{seed}"
    where = Path("data") / "eval" / name
    old_items, new_items = _read(recorded / where / "items.json"), _read(rerun / where / "items.json")
    old_m, new_m = _numbers(_read(recorded / where / "metrics.json")), _numbers(_read(rerun / where / "metrics.json"))
    tasks = sorted(set(old_items or {}) | set(new_items or {}))
    differing = [t for t in tasks if (old_items or {}).get(t) != (new_items or {}).get(t)]
    metrics = {k: [old_m.get(k), new_m.get(k)] for k in sorted(set(old_m) | set(new_m))
               if k not in old_m or k not in new_m or abs(old_m[k] - new_m[k]) > TOL}
    curve: dict[str, float] = {}
    plots = Path("data") / "plots" / name / "train.json"
    old_c, new_c = (_read(recorded / plots) or [], _read(rerun / plots) or []) if seed is not None else ([], [])
    first = None  # the first logged step whose reward differs beyond float order: where they part
    for old_row, new_row in zip(old_c, new_c):
        a, b = _numbers(old_row), _numbers(new_row)
        for k in set(a) & set(b):
            curve[k] = max(curve.get(k, 0.0), abs(a[k] - b[k]))
        if first is None and abs(a.get("reward", 0.0) - b.get("reward", 0.0)) > CURVE_TOL:
            first = a.get("step")
    return {"run": name, "found": old_items is not None and new_items is not None,
            "items_identical": old_items is not None and not differing, "tasks_differing": differing,
            "metrics_differing": metrics, "curve_rows": [len(old_c), len(new_c)],
            "curve_max_abs_diff": {k: curve[k] for k in sorted(curve)}, "curve_first_differing_step": first}


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def rerun(runs: list[tuple[str, int]], log=print) -> list[dict]:
    """Each run trained and evaluated again in a scratch worktree of HEAD, compared with the record.
    The runs of one seed go through one pipeline call (`--methods A B --seeds S`), so two of them
    train side by side as in a study; `wall_seconds` is that call's."""
    out = []
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    logfile = Path(tempfile.mkstemp(prefix="rerun_record-", suffix=".log")[1])
    by_seed: dict[int, list[str]] = {}
    for method, seed in runs:
        by_seed.setdefault(seed, []).append(method)
    commit = _git("rev-parse", "--short=7", "HEAD")
    with tempfile.TemporaryDirectory(prefix="rerun-") as scratch:
        wt = Path(scratch) / "head"
        _git("worktree", "add", "--quiet", "--detach", str(wt), "HEAD")
        try:
            for seed, methods in by_seed.items():
                began = time.monotonic()
                names = " ".join(f"{m}/seed{seed}" for m in methods)
                log(f"rerun_record: {names} through the pipeline in {wt} (log: {logfile})")
                with open(logfile, "a", encoding="utf-8") as f:
                    rc = subprocess.run([sys.executable, "-m", "flows.pipeline", "--methods", *methods,
                                         "--seeds", str(seed)], cwd=wt, env=env, stdout=f,
                                        stderr=subprocess.STDOUT).returncode
                if rc != 0:
                    raise SystemExit(f"rerun_record: the pipeline failed for {names} (exit {rc})")
                wall = round(time.monotonic() - began, 1)
                for method in methods:
                    out.append({**compare(ROOT, wt, method, seed), "rerun_at": commit,
                                "recorded_at": _git("log", "-1", "--format=%h", "--",
                                                    f"data/eval/{method}/seed{seed}/items.json"),
                                "wall_seconds": wall, "trained_beside": len(methods)})
            # Every call evaluates the base again too (its evaluation's code is the runs').
            out.append({**compare(ROOT, wt, "base", None), "rerun_at": commit,
                        "recorded_at": _git("log", "-1", "--format=%h", "--", "data/eval/base/items.json")})
        finally:
            _git("worktree", "remove", "--force", str(wt))
    return out


def merged(old: dict | None, new: list[dict]) -> list[dict]:
    """The record's runs with `new` replacing the ones of the same name (a later rerun of a run
    replaces its earlier one; the others are kept, each with the commit it was rerun at).

    >>> old = {"commit": "aaaaaaa", "runs": [{"run": "rlvr/seed0"}, {"run": "base"}]}
    >>> [(r["run"], r["rerun_at"]) for r in merged(old, [{"run": "rlme/seed0", "rerun_at": "bbbbbbb"},
    ...                                                  {"run": "base", "rerun_at": "bbbbbbb"}])]
    [('rlvr/seed0', 'aaaaaaa'), ('rlme/seed0', 'bbbbbbb'), ('base', 'bbbbbbb')]
    """
    kept = [{"rerun_at": (old or {}).get("commit", ""), **r} for r in (old or {}).get("runs", [])]
    names = {r["run"] for r in new}
    runs = [r for r in kept if r["run"] not in names] + list(new)
    return sorted(runs, key=lambda r: r["run"] == "base")  # the base's line last


def table(record: dict) -> str:
    rows = ["| run | record last changed | rerun at | items identical | metrics differing | largest curve difference |",
            "|---|---|---|---|---|---|"]
    for r in record["runs"]:
        curve = max(r["curve_max_abs_diff"].items(), key=lambda kv: kv[1], default=None)
        at = r.get("rerun_at", record.get("commit", ""))
        rows.append(f"| `{r['run']}` | `{r.get('recorded_at', '')}` | `{at}` | "
                    f"{'yes' if r['items_identical'] else 'no: ' + ', '.join(r['tasks_differing'])} | "
                    f"{', '.join(r['metrics_differing']) or 'none'} | "
                    + (f"{curve[0]} {curve[1]:.1e}" if curve else "no curve")
                    + (f"; rewards part at step {r['curve_first_differing_step']:g}"
                       if r.get("curve_first_differing_step") is not None else "") + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="<method>/seed<S> of the default study")
    ap.add_argument("--json", type=Path, default=OUT, help=f"where to write the record (default {OUT})")
    args = ap.parse_args()
    runs = []
    for name in args.runs:
        if not (m := RUN.match(name)):
            ap.error(f"{name!r}: expected <method>/seed<S>, e.g. rlvr/seed0")
        runs.append((m["method"], int(m["seed"])))
    if _git("status", "--porcelain", "--untracked-files=no"):
        ap.error("commit first: the worktree runs HEAD, and the record is compared with HEAD's files")
    old = json.loads(args.json.read_text(encoding="utf-8")) if args.json.is_file() else None
    record = {"commit": _git("rev-parse", "--short=7", "HEAD"), "runs": merged(old, rerun(runs))}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(table(record))


if __name__ == "__main__":
    main()
