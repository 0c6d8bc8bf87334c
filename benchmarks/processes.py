"""Wall time of one default-budget training on 1 process x 2 threads and on 2 processes x 1 thread.

    python -m benchmarks.processes                  # after the base is built (make run / dvc repro)
    python -m benchmarks.processes --method rlvr --threads 2

In a scratch copy of the project (`benchmarks.parallel_stages.scratch_copy`: the committed code,
this workspace's dvc.lock, prepared data and base model), the pipeline runs `train@<method>-0`
twice with `--force`: first as params say (`grpo.num_processes: 1`) with `--threads` CPU threads,
then with `reward.<method>.grpo.num_processes` = `--threads` and one thread per process (the
stage relaunches itself under `accelerate launch`, torchrun over gloo; docs/multiprocess.md).
Both runs are the same experiment (same global batch and learning rate), so the table also shows
their final train reward and held-out score: equal within the noise of sampling on another number
of ranks, not bit for bit. Prints a table and writes `benchmarks/results/processes.json`. Machine
otherwise idle, one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

from benchmarks.parallel_stages import scratch_copy, timed
from core.params import ROOT


def outcome(repo: Path, method: str) -> dict:
    """The run's last logged train reward and last held-out record."""
    plots = repo / "data" / "plots" / method / "seed0"
    train = json.loads((plots / "train.json").read_text())
    heldout = json.loads((plots / "heldout.json").read_text())
    return {"final_reward": train[-1].get("reward"), "steps": train[-1]["step"],
            "heldout": {k: v for k, v in heldout[-1].items() if not k.startswith("train/")}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default="rlvr")
    p.add_argument("--threads", type=int, default=2, help="threads of the 1-process run = processes "
                   "of the other (one thread each)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "processes.json")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="processes-"))
    repo = work / "repo"
    env = scratch_copy(repo)
    stage = f"train@{args.method}-0"
    pipeline = [sys.executable, "-m", "flows.pipeline"]
    load_before = [round(x, 2) for x in os.getloadavg()]
    runs = {}
    for processes, threads in ((1, args.threads), (args.threads, 1)):
        if processes > 1:  # the same run on N processes: one params key
            params = yaml.safe_load((repo / "params.yaml").read_text())
            method = params["reward"].setdefault(args.method, {}) or {}
            method.setdefault("grpo", {})["num_processes"] = processes
            params["reward"][args.method] = method
            (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        name = f"{processes}x{threads}"
        # Upstream first, untimed (configure re-runs after the params edit; the base if missing).
        timed([*pipeline, "--stages", "configure"], repo, env, work / f"upstream_{name}.log")
        seconds = timed([*pipeline, "--stages", stage, "--force", "--threads", str(threads)], repo,
                        env, work / f"{name}.log")
        runs[name] = {"processes": processes, "threads_per_process": threads,
                      "seconds": round(seconds, 1), **outcome(repo, args.method)}
        print(f"{name}: {seconds:.0f} s", flush=True)
    one, many = runs[f"1x{args.threads}"], runs[f"{args.threads}x1"]
    result = {"method": args.method, "stage": stage, "cpus": os.cpu_count(), "runs": runs,
              "speedup": round(one["seconds"] / many["seconds"], 3),
              "loadavg_before": load_before, "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("| run | wall (s) | final train reward | last held-out |\n|---|---:|---:|---|")
    for r in runs.values():
        held = ", ".join(f"{k} {v:.3f}" for k, v in r["heldout"].items()
                         if isinstance(v, float) and "/" in k and not k.endswith("/n"))
        print(f"| {r['processes']} process(es) × {r['threads_per_process']} thread(s) | "
              f"{r['seconds']:.0f} | {r['final_reward']:.3f} | {held} |")
    print(f"speed-up of {args.threads} processes: {result['speedup']:.2f}×; logs in {work}")


if __name__ == "__main__":
    main()
