"""What the lab's sampler buys a study, in the study's own terms: one pipeline call run twice from
scratch worktrees of HEAD, once with the sampler switched off (transformers' `generate` for GRPO
rollouts and every evaluation, as before `models/sampler.py` existed) and once as committed, one
after the other, each stage's wall time written by the pipeline itself (`--times-file`).

    python -m benchmarks.sampler_study                      # `make run`'s runs: params pipeline.quick
    python -m benchmarks.sampler_study --methods rlvr --seeds 0 1

Both calls run `python -m flows.pipeline --force` on the base of record (in git, so `build_base` is
up to date in both and neither pays for it): the same stages, params and seeds; only the sampler
differs. Switching it off is one function: the worktree's `models/sampler.py` gets a `supports`
that says no to every model, so `models/grpo.py` and `models/generation.py` take their `generate`
path (nothing here is committed to it; the worktrees are removed afterwards). Run it on an idle
machine: the two calls are compared with each other, so anything else running skews the ratio.

It also says whether the two calls reached the same results (`benchmarks.rerun_record.compare`
on each run's per-item test record): with the same seed the sampler draws the tokens `generate`
draws, up to float rounding in a near-tie, so a run may part after a while but its numbers should
not move beyond its seed spread. Writes `benchmarks/results/sampler_study.json` (or `--json`) and
prints a table; `python -m benchmarks.tables` puts it on docs/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.rerun_record import _git, compare
from core.params import ROOT
from tasks.stages import stage_kind

OUT = ROOT / "benchmarks" / "results" / "sampler_study.json"
ARMS = ("generate", "lab")  # in the order they run: before the sampler, then with it
SWITCH_OFF = '''

def supports(model) -> bool:  # benchmarks/sampler_study.py: the sampler switched off
    """No model runs here: everything goes to transformers' `generate`."""
    return False
'''
SUM = ("train", "evaluate")  # the stage kinds the sampler changes; the rest is set-up and report


def switch_off(worktree: Path) -> None:
    """The worktree's sampler refuses every model (its later `supports` replaces the first).

    >>> import tempfile
    >>> wt = Path(tempfile.mkdtemp()); (wt / "models").mkdir()
    >>> _ = (wt / "models" / "sampler.py").write_text("def supports(model) -> bool:\\n    return True\\n")
    >>> switch_off(wt); ns: dict = {}; exec((wt / "models" / "sampler.py").read_text(), ns)
    >>> ns["supports"](object())
    False
    """
    path = worktree / "models" / "sampler.py"
    path.write_text(path.read_text(encoding="utf-8") + SWITCH_OFF, encoding="utf-8")


def totals(times: dict) -> dict:
    """A pipeline times file's seconds by stage kind (train, evaluate) and its wall time.

    >>> totals({"wall_seconds": 30.0, "stages": {"train@rlvr-0": {"action": "run", "seconds": 20.0},
    ...         "evaluate@rlvr-0": {"action": "run", "seconds": 5.0},
    ...         "build_base": {"action": "skip", "seconds": 0.5}}})
    {'train': 20.0, 'evaluate': 5.0, 'wall': 30.0}
    """
    out = {kind: 0.0 for kind in SUM}
    for name, stage in times["stages"].items():
        if stage_kind(name) in out and stage["action"] == "run":
            out[stage_kind(name)] += stage["seconds"] or 0.0
    return {**{k: round(v, 1) for k, v in out.items()}, "wall": times["wall_seconds"]}


def _runs(times: dict) -> list[tuple[str, int]]:
    """The (method, seed) runs a times file trained, from its `train@<method>-<seed>` stages."""
    out = []
    for name in times["stages"]:
        if stage_kind(name) == "train":
            method, _, seed = name.split("@", 1)[1].rpartition("-")
            out.append((method, int(seed)))
    return sorted(out)


def run_arm(arm: str, pipeline_args: list[str], scratch: Path, log=print) -> tuple[Path, dict]:
    """One pipeline call in a fresh worktree of HEAD, the sampler switched off for `generate`;
    returns the worktree (left for the comparison) and the call's times file."""
    wt = scratch / arm
    _git("worktree", "add", "--quiet", "--detach", str(wt), "HEAD")
    if arm == "generate":
        switch_off(wt)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    probe = subprocess.run([sys.executable, "-c", "import models.sampler as s; print(s.__file__, s.supports.__doc__)"],
                           cwd=wt, env=env, capture_output=True, text=True, check=True).stdout
    if str(wt) not in probe or (arm == "generate") != ("No model runs here" in probe):
        raise SystemExit(f"sampler_study: the {arm} worktree does not import its own models/sampler.py: {probe}")
    times_file = wt / "times.json"
    logfile = Path(tempfile.gettempdir()) / f"sampler_study-{arm}.log"  # kept when the call fails
    cmd = [sys.executable, "-m", "flows.pipeline", "--force", "--times-file", str(times_file), *pipeline_args]
    log(f"sampler_study: {arm}: {' '.join(cmd[1:])} in {wt} (log: {logfile})")
    with open(logfile, "w", encoding="utf-8") as f:
        rc = subprocess.run(cmd, cwd=wt, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise SystemExit(f"sampler_study: the {arm} call failed (exit {rc}); its log: {logfile}")
    return wt, json.loads(times_file.read_text(encoding="utf-8"))


def measure(pipeline_args: list[str], log=print) -> dict:
    """Both arms, one after the other, and how their results compare."""
    arms: dict[str, dict] = {}
    began = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="sampler-study-") as tmp:
        scratch, worktrees = Path(tmp), {}
        try:
            for arm in ARMS:
                worktrees[arm], times = run_arm(arm, pipeline_args, scratch, log)
                arms[arm] = {"totals": totals(times), "stages": times["stages"]}
            runs = _runs(arms["lab"])
            same = [compare(worktrees["generate"], worktrees["lab"], m, s) for m, s in runs]
        finally:
            for wt in worktrees.values():
                _git("worktree", "remove", "--force", str(wt))
    return {"command": "python -m flows.pipeline --force " + " ".join(pipeline_args),
            "commit": _git("rev-parse", "--short=7", "HEAD"),
            "began": began, "machine": {"cpu": platform.machine(), "cores": os.cpu_count()},
            "arms": arms, "results": same}


def table(record: dict) -> str:
    """Per stage and in total, the seconds with `generate` and with the lab sampler."""
    gen, lab = record["arms"]["generate"], record["arms"]["lab"]
    rows = ["| stage | `generate`: s | lab sampler: s | speedup |", "|---|---:|---:|---:|"]

    def row(name: str, a: float, b: float) -> str:
        return f"| {name} | {a:,.0f} | {b:,.0f} | {a / b:.2f}x |" if b else f"| {name} | {a:,.0f} | {b:,.0f} | |"

    for name in sorted(lab["stages"], key=lambda k: (stage_kind(k) not in SUM, k)):
        a, b = gen["stages"].get(name, {}), lab["stages"][name]
        if stage_kind(name) in SUM and b["action"] == "run" and a.get("action") == "run":
            rows.append(row(f"`{name}`", a["seconds"], b["seconds"]))
    for kind in SUM:
        rows.append(row(f"**all {kind} stages**", gen["totals"][kind], lab["totals"][kind]))
    rows.append(row("**the call's wall time**", gen["totals"]["wall"], lab["totals"]["wall"]))
    return "\n".join(rows)


def results_line(record: dict) -> str:
    """Whether the two calls reached the same per-item test results, run by run."""
    same = [r["run"] for r in record["results"] if r["items_identical"]]
    parted = [f"{r['run']} ({', '.join(r['tasks_differing'])})" for r in record["results"] if not r["items_identical"]]
    return (f"Per-item test records identical in {len(same)} of {len(record['results'])} runs"
            + (f"; differing: {'; '.join(parted)}" if parted else "") + ".")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=None,
                    help="only these methods (with neither this nor --seeds: `--quick`, params pipeline.quick)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="only these seeds")
    ap.add_argument("--json", type=Path, default=OUT, help=f"where to write the record (default {OUT})")
    args = ap.parse_args()
    if _git("status", "--porcelain", "--untracked-files=no"):
        ap.error("commit first: the worktrees run HEAD")
    chosen = ((["--methods", *args.methods] if args.methods else [])
              + (["--seeds", *map(str, args.seeds)] if args.seeds else []))
    record = measure(chosen or ["--quick"])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(table(record))
    print(results_line(record))


if __name__ == "__main__":
    main()
