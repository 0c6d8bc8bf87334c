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
from flows.revalidate import compare as revalidate_compare

TOL = 1e-6  # a float-order difference (another summation order) is not a different run
CURVE_TOL = 1e-5  # a logged mean over a window of steps: float order moves it by about 1e-7
RUN = re.compile(r"^(?P<method>[\w.-]+)/seed(?P<seed>\d+)$")
OUT = ROOT / "benchmarks" / "results" / "rerun_record.json"


def compare(recorded: Path, rerun: Path, method: str, seed: int | None) -> dict:
    """The rerun (a checkout's root) against the record (another checkout's root), one run (`base`
    with seed None: the base's evaluation): `flows.revalidate.compare` (the one home of the
    comparison, `make revalidate`'s) at this benchmark's float-order tolerances."""
    return revalidate_compare(recorded, rerun, method, seed, tol=TOL, curve_tol=CURVE_TOL)


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
