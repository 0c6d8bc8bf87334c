"""Wall time of independent train stages run serially and side by side by the pipeline.

    python -m benchmarks.parallel_stages            # after the base is built (make run / dvc repro)

Copies the project (the committed code, params and dvc files, this workspace's dvc.lock, the
prepared data, components, run configs and base model) into a scratch folder, so the study's
outputs and dvc.lock stay untouched, and there
runs the same train stages twice through `flows.pipeline` with `--force`: `--max-parallel 1`,
then `--max-parallel 2`, one CPU thread per stage both times. A forced train stage starts from
scratch (its resumable `checkpoint-<step>` folders are deleted with its outputs), so both passes
train every step. Prints a table and writes
`benchmarks/results/parallel_stages.json` (a DVC metric). Machine otherwise idle, one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.params import ROOT

STAGES = ["train@rlvr-0", "train@random-0", "train@rlme-0", "train@rlvr-1"]
KEEP_DATA = ("prepared", "components", "base_model", "runs", "base_model_info.json")


def scratch_copy(dest: Path) -> dict[str, str]:
    """The committed code (`git archive HEAD`: a benchmark measures what is committed, not an
    edit in progress) with this workspace's dvc.lock and the prepared inputs it records."""
    dest.mkdir(parents=True)
    subprocess.run(f"git archive HEAD | tar -x -C {dest}", cwd=ROOT, shell=True, check=True)
    shutil.copy2(ROOT / "dvc.lock", dest / "dvc.lock")
    # Share this workspace's DVC cache (an output counts as changed when its cache copy is missing).
    (dest / ".dvc" / "config.local").write_text(f"[cache]\n    dir = {ROOT / '.dvc' / 'cache'}\n")
    for name in KEEP_DATA:
        src = ROOT / "data" / name
        if src.exists():  # what is missing, the pipeline's upstream stages make in the copy
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / "data" / name)
    (dest / "mlflow").mkdir(exist_ok=True)
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{dest / 'mlflow' / 'mlflow.db'}",
               PREFECT_HOME=str(dest / ".prefect"), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
    env.pop("PREFECT_API_URL", None)
    subprocess.run("git init -q && git add -A && git commit -qm bench", cwd=dest, shell=True,
                   env=env, check=True)
    return env


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> float:
    start = time.time()
    with log.open("w") as f:
        r = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r.returncode}); log: {log}")
    return time.time() - start


def stage_seconds(log: Path) -> dict[str, float]:
    """Each train stage's wall time, from its start line to the next completed task in the log
    (serially that is its own end; side by side it can be the other stage's: a rough split)."""
    import datetime as dt
    import re

    out, start = {}, {}
    for line in log.read_text().splitlines():
        m = re.match(r"^(\S+ \S+),\d+ .*?(train@\S+): python -m", line)
        stamp = line[:19]
        if m:
            start[m[2]] = dt.datetime.fromisoformat(m[1])
        elif "Finished in state Completed" in line and start:
            name = min(start, key=start.get)
            out[name] = round((dt.datetime.fromisoformat(stamp) - start.pop(name)).total_seconds())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stages", nargs="+", default=STAGES)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "parallel_stages.json")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="parallel-stages-"))
    env = scratch_copy(work / "repo")
    base = [sys.executable, "-m", "flows.pipeline", "--stages", *args.stages, "--force",
            "--threads", "1"]
    rows = {}
    load_before = [round(x, 2) for x in os.getloadavg()]
    # Every stage the timed ones depend on first, untimed (`configure` after a code change, the
    # base model when the copy lacks it): both passes then time the train stages alone. An
    # earlier version brought only `configure` up to date, and its serial pass also rebuilt the
    # base (5244 s for 713 s of training).
    from tasks.stages import stage_graph

    graph = stage_graph(work / "repo")
    upstream = sorted(set().union(*(graph[s] for s in args.stages)) - set(args.stages))
    timed([sys.executable, "-m", "flows.pipeline", "--stages", *upstream], work / "repo", env,
          work / "upstream.log")
    for limit in (1, 2):
        rows[limit] = timed([*base, "--max-parallel", str(limit)], work / "repo", env,
                            work / f"max_parallel_{limit}.log")
        print(f"max_parallel {limit}: {rows[limit]:.0f} s", flush=True)
    result = {"stages": args.stages, "threads_per_stage": 1, "cpus": os.cpu_count(),
              "stage_seconds": {limit: stage_seconds(work / f"max_parallel_{limit}.log")
                                for limit in rows},
              "serial_s": round(rows[1], 1), "max_parallel_2_s": round(rows[2], 1),
              "speedup": round(rows[1] / rows[2], 3),
              # Anything else running skews the ratio: the 1/5/15-min load before and after.
              "loadavg_before": load_before, "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("| stages | max_parallel 1 (s) | max_parallel 2 (s) | speed-up |\n|---|---|---|---|")
    print(f"| {len(args.stages)} × train, 1 thread each | {rows[1]:.0f} | {rows[2]:.0f} | "
          f"{rows[1] / rows[2]:.2f}× |")
    print(f"logs in {work}")


if __name__ == "__main__":
    main()
