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
draws, up to float rounding in a near-tie, so a run may part after a while; its headline test
metrics in both calls say how far it moved. Writes `benchmarks/results/sampler_study.json` (or `--json`) and
prints a table; `python -m benchmarks.tables` puts it on docs/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.rerun_record import _git, compare
from benchmarks.sampling import cpu
from core.params import ROOT
from tasks.stages import stage_kind

OUT = ROOT / "benchmarks" / "results" / "sampler_study.json"
ARMS = ("generate", "lab")  # in the order they run: before the sampler, then with it
SWITCH_OFF = '''

def supports(model) -> bool:  # benchmarks/sampler_study.py: the sampler switched off
    """No model runs here: everything goes to transformers' `generate`."""
    return False
'''
# The stage kinds the sampler changes (the base's evaluation counted with the evaluations); the
# rest is set-up and the report.
SUM = {"train": "train", "evaluate": "evaluate", "evaluate_base": "evaluate"}


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


def paired(record: dict) -> tuple[list[tuple[str, float, float]], list[tuple[str, str, float]]]:
    """The stages the sampler changes that ran in both calls, as (stage, `generate` s, lab s), in
    the order trainings, evaluations, the base's; and those that ran in one call only, as (stage,
    arm, s): a stage up to date in one worktree (the base's evaluation, whose code is the sampler's:
    it runs again where the sampler is switched off) is no comparison.

    >>> run, skip = {"action": "run", "seconds": 20.0}, {"action": "skip", "seconds": 1.0}
    >>> paired({"arms": {"generate": {"stages": {"train@rlvr-0": run, "evaluate_base": run, "prepare": run}},
    ...                  "lab": {"stages": {"train@rlvr-0": run, "evaluate_base": skip, "prepare": run}}}})
    ([('train@rlvr-0', 20.0, 20.0)], [('evaluate_base', 'generate', 20.0)])
    """
    stages = {arm: record["arms"][arm]["stages"] for arm in ARMS}
    order = list(SUM)
    names = sorted({k for st in stages.values() for k in st if stage_kind(k) in SUM},
                   key=lambda k: (order.index(stage_kind(k)), k))
    both, one = [], []
    for name in names:
        ran = {arm: st[name]["seconds"] or 0.0 for arm, st in stages.items()
               if st.get(name, {}).get("action") == "run"}
        if len(ran) == len(ARMS):
            both.append((name, ran["generate"], ran["lab"]))
        one += [(name, arm, s) for arm, s in ran.items() if len(ran) == 1]
    return both, one


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
                arms[arm] = times  # the pipeline's times file: wall_seconds and each stage
            runs = _runs(arms["lab"])
            same = [compare(worktrees["generate"], worktrees["lab"], m, s) for m, s in runs]
        finally:
            for wt in worktrees.values():
                _git("worktree", "remove", "--force", str(wt))
    return {"command": "python -m flows.pipeline --force " + " ".join(pipeline_args),
            "commit": _git("rev-parse", "--short=7", "HEAD"),
            "began": began, "machine": cpu(),
            "arms": arms, "results": same}


def table(record: dict) -> str:
    """Per stage, and summed by kind, the seconds with `generate` and with the lab sampler (the
    stages that ran in both calls), then each call's wall time and the stages one call ran alone."""
    both, one = paired(record)
    rows = ["| stage | `generate`: s | lab sampler: s | speedup |", "|---|---:|---:|---:|"]

    def row(name: str, a: float, b: float) -> str:
        return f"| {name} | {a:,.0f} | {b:,.0f} | " + (f"{a / b:.2f}x |" if b else "|")

    rows += [row(f"`{name}`", a, b) for name, a, b in both]
    for kind in dict.fromkeys(SUM.values()):
        mine = [(a, b) for name, a, b in both if SUM[stage_kind(name)] == kind]
        if mine:
            rows.append(row(f"**all {kind} stages**", sum(a for a, _ in mine), sum(b for _, b in mine)))
    wall = [record["arms"][arm]["wall_seconds"] for arm in ARMS]
    rows.append(row("**the call's wall time**", *wall))
    if one:
        rows.append("\nRan in one call only (in its wall time, not in the sums): " + "; ".join(
            f"`{name}` with {'`generate`' if arm == 'generate' else 'the lab sampler'}, {s:,.0f} s"
            for name, arm, s in one) + ".")
    return "\n".join(rows)


def results_table(record: dict) -> str:
    """Each run's headline test metrics in the two calls (`evals.registry.TASK_HEADLINE`), and
    whether its per-item test records were identical."""
    from evals.registry import TASK_HEADLINE

    keys = [k for ks in TASK_HEADLINE.values() for k in ks]
    rows = ["| run | per-item records identical | headline metrics that moved: `generate` → lab sampler |",
            "|---|---|---|"]
    for r in record["results"]:
        moved = []
        for k in keys:
            a, b = r["metrics_differing"].get(k) or (None, None)  # only the metrics that differ
            if a is not None and b is not None:
                moved.append(f"{k} {a:.3f} → {b:.3f}")
        rows.append(f"| `{r['run']}` | {'yes' if r['items_identical'] else 'no'} | {'; '.join(moved) or 'none'} |")
    return "\n".join(rows)


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
    print()
    print(results_table(record))


if __name__ == "__main__":
    main()
