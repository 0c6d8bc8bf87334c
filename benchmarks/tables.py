"""The speed page's tables (docs/speed.md), the GPU page's record (docs/gpu.md) and the report
page's rerun check (docs/report.md), generated
from the committed benchmark records and logs, so that no measured number is typed into the docs.

    python -m benchmarks.tables            # rewrite the generated blocks of both pages
    python -m benchmarks.tables --check    # exit 1 if they differ from the records (a test runs it)

`make results` runs it. Blocks:
- `sampling`: `benchmarks/results/sampling.json` (`python -m benchmarks.sampling`): tokens per
  second of transformers' `generate` and of the lab's sampler at the rollout and evaluate shapes;
- `sampling_profile`: `benchmarks/results/sampling_profile.json` (`python -m benchmarks.sampling
  --profile`): where a step of the lab sampler spends its time at those shapes;
- `profile`: the sampling parts of `benchmarks/results/profile_run_generate.json` (the default run
  profiled with `generate`) against `benchmarks/results/profile_run.json` (the lab sampler), each
  with its own measured matmul peak;
- `gpu_runs` (docs/gpu.md): the result lines of the GPU runs' logs in `benchmarks/results/gpu/`;
- `gpu_memory` (docs/gpu.md): the memory estimate (core/memory.py) of every arm of every GPU
  preset, and the estimate against the out-of-memory record among those logs;
- `sampler_study`: `benchmarks/results/sampler_study.json` (`python -m benchmarks.sampler_study`):
  one pipeline call's stage times with the sampler switched off and as committed;
- `study_times`: each recorded study's stage times (`studies/<study>/times.json`);
- `rerun_record` (docs/report.md): recorded runs trained again at HEAD against their record
  (`benchmarks/results/rerun_record.json`, `python -m benchmarks.rerun_record`);
- `trl_rewards` (docs/use_in_your_trainer.md): every reward family as a TRL script gets it;
- `bases` (docs/bases.md): each measured base's premises (`data/eval/base/premises.json`,
  `studies/<study>/data/eval/base/premises.json`, the premises stage).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from core.params import ROOT
from tasks.stages import stage_kind

RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "speed.md"


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _cpu(machine: dict) -> str:
    """`x86_64 (AVX-512), 2 cores`: a record's machine, its vector instructions where it has them."""
    vector = f" ({machine['vector']})" if machine.get("vector") else ""
    return f"{machine['cpu']}{vector}, {machine['cores']} cores"


def sampling_table() -> str:
    from benchmarks.sampling import table

    result = _load("sampling.json")
    if result is None:
        return "_Not measured yet: `python -m benchmarks.sampling`._"
    m = result["machine"]
    return (f"{table(result)}\n\n{_cpu(m)}, {m['threads']} torch thread(s), "
            f"torch {m['torch']}, a {m['parameters']:,}-parameter model"
            f"{' (--quick)' if result.get('quick') else ''}; `benchmarks/results/sampling.json`.")


def sampling_profile_table(result: dict | None = None) -> str:
    """The per-step profile block: `result` (a `sampling_profile.json` record), by default the
    committed file."""
    from benchmarks.sampling import profile_table

    result = result if result is not None else _load("sampling_profile.json")
    if result is None:
        return "_Not measured yet: `python -m benchmarks.sampling --profile`._"
    m = result["machine"]
    return (f"{profile_table(result)}\n\nShares: self CPU time under `torch.profiler`, one call "
            "per shape; ms/step: one unprofiled call; attention GB/s and matmul GFLOP/s: the KV "
            "MB and matmul GFLOP per step over that part's time; `generate` ms/step: transformers' "
            "`generate` on the same batch, and the goal a third of it; 1-row ms/step: the lab "
            "sampler on the batch's first row alone (same prompt length and steps), the per-step "
            "cost that fewer rows do not remove; floor: the 1-row time plus the step's matmul "
            "GFLOP at this machine's fp32 matmul peak, measured by the same run"
            + (f" ({result['matmul_peak_gflops']} GFLOP/s). " if result.get("matmul_peak_gflops") else ". ")
            + f"{_cpu(m)}, {result.get('threads', m['threads'])} torch thread(s), "
            f"torch {m['torch']}, a {m['parameters']:,}-parameter model"
            f"{' (--quick)' if result.get('quick') else ''}; `benchmarks/results/sampling_profile.json`.")


def _parts(profile: dict) -> dict[tuple[str, str], tuple[float, float | None, float]]:
    """(stage, part) -> (default-run seconds, GFLOP/s or None, % of that thread count's peak)."""
    peaks = {int(n): max(shapes.values()) for n, shapes in profile["matmul_gflops"].items()}
    out = {}
    for stage in profile["stages"]:
        total = sum(sec for sec, _ in stage["parts"].values()) * stage["scale"]
        if "heldout" in stage:
            total += stage["heldout"]["seconds_each"] * stage["heldout"]["default_count"]
        out[(stage["stage"], "total")] = (total, None, 0.0)
        for part, (sec, flops) in stage["parts"].items():
            rate = flops / sec / 1e9 if flops and sec > 0 else None
            share = rate / peaks[stage["threads"]] if rate is not None else 0.0
            out[(stage["stage"], part)] = (sec * stage["scale"], rate, share)
    return out


def profile_table() -> str:
    before, after = _load("profile_run_generate.json"), _load("profile_run.json")
    if before is None or after is None:
        return "_Not measured yet: `python -m benchmarks.profile_run --parts grpo evaluate`._"
    b, a = _parts(before), _parts(after)
    lines = ["| stage | part | `generate`: s | GFLOP/s | % peak | lab sampler: s | GFLOP/s | % peak |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    sampled = {k[0] for k in b if k[1] in ("generation", "sampling")}  # the stages the sampler changes
    for key in [k for k in b if k in a and k[0] in sampled and k[1] in ("generation", "sampling", "total")]:
        cells = []
        for sec, rate, share in (b[key], a[key]):
            cells += [f"{sec:.0f}", "" if rate is None else f"{rate:.1f}",
                      "" if rate is None else f"{share:.0%}"]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    peaks = [max(p["matmul_gflops"][str(p["threads"])].values()) for p in (before, after)]
    lines.append("")
    hosts = [_cpu(p["machine"]) if p.get("machine") else "a host it did not record" for p in (before, after)]
    where = (f"both on {hosts[0]}" if hosts[0] == hosts[1]
             else f"on {hosts[0]} and {hosts[1]}: another host, so not the sampler's gain alone")
    lines.append(f"Seconds are scaled to the default run. Matmul peak (fp32, {after['threads']} "
                 f"thread(s)), measured by each run: {peaks[0]:.0f} and {peaks[1]:.0f} GFLOP/s, {where}; "
                 "`benchmarks/results/profile_run_generate.json` (`--sampler generate`), "
                 "`benchmarks/results/profile_run.json`.")
    return "\n".join(lines)


GPU_LINE = re.compile(r"^(\d\d:\d\d:\d\d )?(PASS|FAIL|SKIP|MEASURE|smoke:)")
# One optimiser step as TRL logs it (a dict literal, after the optional time stamp).
TRL_STEP = re.compile(r"^(\d\d:\d\d:\d\d )?(\{'loss': .*\})\s*$")


def trl_step_line(line: str) -> str | None:
    """A TRL step log as one short line (its step time, completions and tokens), or None."""
    import ast

    match = TRL_STEP.match(line)
    if not match:
        return None
    try:
        logged = ast.literal_eval(match.group(2))
    except (ValueError, SyntaxError):
        return None
    if "step_time" not in logged:
        return None
    keys = ("step_time", "completions/mean_length", "num_tokens", "epoch")
    return (match.group(1) or "") + "TRL step: " + ", ".join(
        f"{k} {logged[k]}" for k in keys if k in logged)


def gpu_runs_block(folder: Path | None = None) -> str:
    """docs/gpu.md's record of what ran on a GPU: for each run in `<folder>/runs.json` (default
    benchmarks/results/gpu/), its command, the software the device reported, and the result
    lines of its committed log (PASS/FAIL/SKIP/MEASURE, as printed; the rest is progress output).
    The last line of the log is shown too when it is not a result line (a run its timeout ended),
    and a `--measure` run that printed no MEASURE line shows the steps TRL logged (`trl_step_line`)."""
    folder = folder or RESULTS / "gpu"
    index = folder / "runs.json"
    if not index.exists():
        return "_Nothing has run on a GPU yet: docs/gpu.md, section 2._"
    out = []
    for run in json.loads(index.read_text()):
        lines = (folder / run["log"]).read_text(encoding="utf-8", errors="replace").splitlines()
        lines = [line.split("\r")[-1] for line in lines]
        shown = [line for line in lines if GPU_LINE.match(line)]
        if "--measure" in run["command"] and not any(GPU_LINE.match(x).group(2) == "MEASURE" for x in shown):
            # A measurement its timeout ended: the steps TRL logged before it are the result.
            shown += [step for step in map(trl_step_line, lines) if step]
        last = lines[-1] if lines else ""
        if last and not GPU_LINE.match(last):
            step = trl_step_line(last)
            if step and shown and shown[-1] == step:
                shown[-1] = f"(the log ends here) {step}"
            else:
                shown += [f"(the log ends here) {step or last}"]
        software = (folder / run["software"]).read_text().split() if run.get("software") else []
        names = ["python", "torch", "transformers", "trl", "prefect", "mlflow", "datasets"]
        versions = ", ".join(f"{n} {v}" for n, v in zip(names, software))
        out.append(f"`{run['command']}` ({run['date']}; {versions}; "
                   f"`benchmarks/results/gpu/{run['log']}`):\n\n```\n" + "\n".join(shown) + "\n```")
    return "\n\n".join(out)


def _gib(pattern: str, line: str) -> float:
    """The size `pattern` names in a CUDA out-of-memory message, in GiB."""
    m = (re.search(pattern + r" ([\d.]+) (GiB|MiB)", line)
         or re.search(r"([\d.]+) (GiB|MiB) " + pattern, line))
    if not m:
        raise ValueError(f"no {pattern!r} in the out-of-memory line")
    return float(m.group(1)) / (1024 if m.group(2) == "MiB" else 1)


def gpu_oom_record(folder: Path | None = None) -> dict | None:
    """The first GPU run of `<folder>/runs.json` whose log holds a CUDA out-of-memory line, with
    that line's sizes in GiB: the card's capacity, what PyTorch had allocated, what the process
    had in use, and the allocation that failed. None if no run ran out of memory."""
    folder = folder or RESULTS / "gpu"
    index = folder / "runs.json"
    if not index.exists():
        return None
    for run in json.loads(index.read_text()):
        text = (folder / run["log"]).read_text(encoding="utf-8", errors="replace")
        line = next((x for x in text.splitlines() if "OutOfMemoryError" in x), None)
        if line is not None:
            return {**run, "capacity": _gib("total capacity of", line),
                    "allocated": _gib("is allocated by PyTorch", line),
                    "in_use": _gib("this process has", line), "request": _gib("Tried to allocate", line)}
    return None


def oom_reconstruction(record: dict) -> dict:
    """The out-of-memory record of `qwen3_0p6b_1gpu`'s rlvr recipe (vLLM off, a step's rollouts in
    one call: no steps_per_generation then) against the estimate (core/memory.py).

    The failed request is one layer's K (or V) cast to bf16 for SDPA at a decoding step: rows x
    length x KV heads x head dim x 2 bytes (the allocator rounds up to 2 MiB), which gives the
    sequence length then. No optimiser step had run (no gradients, no AdamW moments): the float32
    weights, their bf16 autocast copy, the float32 cache at that length and the one cast already
    made are what PyTorch had allocated (`at_failure`). `estimate` is the whole configuration's,
    with the shortest prompt that length implies."""
    from core.memory import (
        BF16,
        FP32,
        GIB,
        estimate,
        model_shape,
        preset_params,
        rollout_rows,
        sampling_parts,
    )
    from core.params import read_raw

    p = preset_params(read_raw(), "qwen3_0p6b_1gpu", use_vllm=False, steps_per_generation=None)
    shape = model_shape(p.base_model.path)
    rows, completion = rollout_rows(p, "rlvr"), p.method_grpo("rlvr").max_completion_length
    length = int(record["request"] * GIB // (rows * shape.kv_heads * shape.head_dim * BF16))
    parts = sampling_parts(shape, rows, length, FP32)
    at_failure = ((FP32 + BF16) * shape.parameters + parts["cache"] + parts["cast"] // 2) / GIB
    e = estimate(p, "rlvr", prompt_tokens=max(0, length - completion),
                 gpu_memory_gib=record["capacity"])
    return {"rows": rows, "length": length, "completion": completion, "at_failure": at_failure,
            "estimate": e}


def gpu_memory_block() -> str:
    """docs/gpu.md, section 7: the memory estimate (core/memory.py) of every arm of every GPU preset
    (those that declare `pipeline.gpu_memory_gib`), as set and with `grpo.use_vllm: false`, the
    parts of each preset's largest, the KV cache per token of each model, and the estimate
    against the out-of-memory record."""
    from core.memory import (
        BF16,
        FP32,
        RESERVE_GIB,
        MemoryEstimate,
        estimate,
        gpu_presets,
        model_shape,
        preset_params,
    )
    from core.params import load, read_raw

    raw = read_raw()
    presets = gpu_presets(raw)
    if not presets:
        return "_No preset declares its GPU (`pipeline.gpu_memory_gib`)._"
    loaded = {name: (load(preset=name), preset_params(raw, name, use_vllm=False)) for name in presets}
    arms = list(dict.fromkeys(m for p, _ in loaded.values() for m in p.methods))
    cells: dict[str, list[str]] = {arm: [] for arm in arms}
    largest: dict[str, tuple[str, MemoryEstimate]] = {}
    for name, (p, fallback) in loaded.items():
        for arm in arms:
            if arm not in p.methods:
                cells[arm].append("")
                continue
            e, f = estimate(p, arm), estimate(fallback, arm)
            cells[arm].append(f"{e.total:.0f} / {f.total:.0f}")
            if name not in largest or e.total > largest[name][1].total:
                largest[name] = (arm, e)
    groups: dict[tuple[str, ...], list[str]] = {}
    for arm, row in cells.items():
        groups.setdefault(tuple(row), []).append(arm)
    table = ["| arms | " + " | ".join(f"`{n}`" for n in presets) + " |",
             "|---|" + "---:|" * len(presets),
             "| GPU memory declared | " + " | ".join(f"{loaded[n][0].pipeline.gpu_memory_gib:g}"
                                                    for n in presets) + " |"]
    table += [f"| {', '.join(names)} | " + " | ".join(row) + " |" for row, names in groups.items()]
    detail = ["| part | " + " | ".join(f"`{n}`: {largest[n][0]}" for n in presets) + " |",
              "|---|" + "---:|" * len(presets)]
    for part in [*MemoryEstimate.RESIDENT, *MemoryEstimate.PHASES, "reserve"]:
        values = [getattr(largest[n][1], part) for n in presets]
        marked = [f"**{v:.1f}**" if part == largest[n][1].peak_phase else f"{v:.1f}"
                  for n, v in zip(presets, values)]
        detail.append(f"| {part.replace('_', ' ')} | " + " | ".join(marked) + " |")
    detail.append("| total | " + " | ".join(f"{largest[n][1].total:.1f}" for n in presets) + " |")
    shapes = {p.base_model.path: model_shape(p.base_model.path) for p, _ in loaded.values()}
    kv = "; ".join(f"`{path}` ({s.parameters / 1e9:.2f}B parameters): {s.kv_bytes(FP32) // 1024} KiB "
                   f"in float32 (the trained policy), {s.kv_bytes(BF16) // 1024} KiB in bf16 (vLLM, a "
                   "read-only model)" for path, s in shapes.items())
    out = [f"GiB per training GPU, as set / with `grpo.use_vllm: false`, the reserve ({RESERVE_GIB:g} "
           "GiB) included, prompts at the estimate's budget (`core.memory.PROMPT_TOKENS`):", "",
           "\n".join(table), "",
           "The parts of each preset's largest estimate as set (GiB; bold: the phase that sets the peak):",
           "", "\n".join(detail), "", f"KV cache per token: {kv}."]
    record = gpu_oom_record()
    if record is not None:
        r = oom_reconstruction(record)
        out += ["", f"Against the record (`benchmarks/results/gpu/{record['log']}`, `{record['command']}`): "
                f"{r['rows']} completions in one `generate` call ran out of memory with "
                f"{record['allocated']:.2f} GiB allocated, asking for {record['request'] * 1024:.0f} MiB "
                f"more: one layer's K or V cast to bf16 at position {r['length']}. The estimate's terms "
                f"at that length (the weights, their bf16 copy, the float32 cache, one cast) give "
                f"{r['at_failure']:.2f} GiB. The whole configuration, with prompts of at least "
                f"{r['length'] - r['completion']} tokens, is estimated at {r['estimate'].total:.0f} GiB, "
                f"over the card's {record['capacity']:.2f} GiB."]
    return "\n".join(out)


def study_calls(record: Path) -> list[dict]:
    """A recorded study's calls' times, each a pipeline call's `write_times` file, in order (the
    plan's extension a call of its own): `tasks.studies.recorded_calls`."""
    from tasks.studies import recorded_calls

    return [t for call in recorded_calls(record) for t in (call.get("times"), call.get("plan")) if t]


def study_times_table(folder: Path | None = None) -> str:
    """What each recorded study cost here, every call of it added up (`study_calls`): the stages
    that ran (not those up to date), the base build, the trainings and the wall time."""
    folder = folder or ROOT / "studies"
    rows = []
    for times in sorted(folder.glob("*/times.json")):
        study = json.loads((times.parent / "study.json").read_text())
        calls = study_calls(times.parent)
        stages = {k for t in calls for k in t["stages"]}
        # What ran to its end: not what was up to date, kept its record or came back from DVC's
        # run-cache (`restore`, seconds of a checkout: a resumed study restores the trainings its
        # last call ran), nor a stage a call stopped by hand left running.
        idle = ("skip", "recorded", "restore", "not run", "running")
        ran = [(k, v) for t in calls for k, v in t["stages"].items() if v["action"] not in idle]
        trainings = [v["seconds"] or 0 for k, v in ran if stage_kind(k) == "train"]  # train_extra@ too
        builds = [v["seconds"] or 0 for k, v in ran if k == "build_base"]
        base = sum(builds) if builds else None
        mean = f", {sum(trainings) / len(trainings) / 60:.1f} min each" if trainings else ""
        rows.append(f"| `{times.parent.name}` | `{study['commit'][:7]}` | {len(calls)} | "
                    f"{len({k for k, _ in ran})} of {len(stages)} | {'' if base is None else f'{base / 60:.0f} min'} | "
                    f"{len(trainings)}{mean} | "
                    f"{sum(t['wall_seconds'] for t in calls) / 60:.0f} min | {calls[0]['machine']['cores']} |")
    if not rows:
        return "_No study has recorded its times yet (a study records them from this version on)._"
    return ("| study | last commit | calls | stages run | base build | trainings run (mean) | wall | cores |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\nFrom "
            "`studies/<study>/times.calls.json` (each pipeline call of the study, the plan's extension a "
            "call of its own; a record made before that file: `times.json` and `times.plan.json`), added "
            "up over the calls; stages run: those that ran in any call (not those up to date). Wall "
            "times are this machine's as it was: a study that ran beside "
            "other work (a CI rehearsal) took longer than it would alone.")


def sampler_study_block(result: dict | None = None) -> str:
    """One pipeline call's stages with `generate` everywhere and with the lab sampler, and whether
    their results matched (`benchmarks/results/sampler_study.json`)."""
    from benchmarks.sampler_study import results_table, table

    result = result if result is not None else _load("sampler_study.json")
    if result is None:
        return "_Not measured yet: `python -m benchmarks.sampler_study`._"
    m = result["machine"]
    return (f"{table(result)}\n\n{results_table(result)}\n\n`{result['command']}` at `{result['commit']}` "
            f"({result['began'][:10]}), from two scratch worktrees, first with the sampler switched off, "
            f"then as committed, nothing else running; stages two at a time; {_cpu(m)}; "
            "`benchmarks/results/sampler_study.json`.")


def rerun_record_block(result: dict | None = None) -> str:
    """docs/report.md: recorded runs trained again at HEAD against their record
    (`benchmarks/results/rerun_record.json`, `python -m benchmarks.rerun_record`)."""
    from benchmarks.rerun_record import table

    result = result if result is not None else _load("rerun_record.json")
    if not result or not result.get("runs"):
        return "No rerun recorded yet (`python -m benchmarks.rerun_record rlvr/seed0`)."
    return (table(result) + "\n\nFrom `benchmarks/results/rerun_record.json`: items identical means "
            "every test item's record (`items.json`) of every task is the same; a metric differs "
            "beyond 1e-6; the curve column is the training log's largest difference, and where the "
            "two part, the first logged step whose mean reward differs beyond 1e-5 (a rerun "
            "recorded before that column has none).")


def trl_rewards_block() -> str:
    """docs/use_in_your_trainer.md: every reward family as a TRL script gets it
    (`rewards.api.FAMILIES`), what it reads (`docs/methods/label_use.json`, measured by
    tests/test_label_use.py) and its per-step cost against `random` in the same run
    (`benchmarks/results/reward_overhead.json`, then `reward_overhead_intrinsic.json`)."""
    from rewards.api import FAMILIES

    use = json.loads((ROOT / "docs" / "methods" / "label_use.json").read_text())
    records = [(name, _load(name)) for name in ("reward_overhead.json", "reward_overhead_intrinsic.json")]
    lines = ["| method | in `rewards.api` | kind | labels it reads | references it reads | model it reads "
             "| GRPO step vs `random` | reward ms / completion | record |",
             "|---|---|---|---|---|---|---:|---:|---|"]
    for f in FAMILIES:
        reads = use["methods"][f.method]["reads"]
        kinds = {k: [f"`{field}`" for field, hit in reads.items() if hit and use["fields"][field]["kind"] == k]
                 for k in ("label", "reference")}
        found = next(((name, r["results"][f.method]) for name, r in records
                      if r and f.method in r["results"]), None)
        if found is None:
            cost = ["not measured", "", ""]
        else:
            name, m = found
            ms = m["reward_ms_per_completion"]
            cost = [f"{m['overhead_vs_random']:+.0%} ({m['median_step_s']:.2f} s vs {m['baseline_step_s']:.2f} s)",
                    "in the step" if ms is None else f"{ms:.3g}", f"`{name}`"]
        lines.append(f"| `{f.method}` | {f.api} | {f.kind} | {', '.join(kinds['label']) or 'none'} | "
                     f"{', '.join(kinds['reference']) or 'none'} | {f.model or 'none'} | " + " | ".join(cost) + " |")
    setups = "; ".join(f"`{name}`: {r['machine']}, {r['steps']} steps per block, {r['repeats']} repeats"
                       for name, r in records if r)
    return ("\n".join(lines) + "\n\nGRPO step: the median wall time of a training step with the method's "
            "rewards against one with `random` (same base, data and seed, blocks interleaved; `random[task]` "
            "on the method's own task where it trains on another), from `python -m benchmarks.reward_overhead`; "
            "reward ms: the reward callables' own time per completion (DRO's and RLCER's rewards are computed "
            f"inside their trainer's step). {setups}. Reads: measured by `tests/test_label_use.py` "
            "(`docs/methods/label_use.json`).")


def _premises_record(path: Path, root: Path) -> dict:
    """One base's premises record, checked for what the `bases` block reads: a ValueError naming
    the file (relative to `root`) where it is not JSON, not an object, lacks a measure or holds a
    value of the wrong kind."""
    from evals.premises import K

    name = path.relative_to(root) if path.is_relative_to(root) else path
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{name}: malformed premises record, not JSON ({e})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{name}: malformed premises record, not a JSON object")
    for key in BASES_MEASURES:
        key = key.format(k=K)
        if key not in record:
            raise ValueError(f"{name}: malformed premises record, no {key!r}")
    for key, value in record.items():
        number = key.startswith("premise/pass@") or key.startswith("premise/maj@") or key in (
            "premise/token_entropy", "premise/self_certainty_auroc")
        if number and not (value is None or (isinstance(value, int | float) and not isinstance(value, bool))):
            raise ValueError(f"{name}: malformed premises record, {key!r} is {value!r}, not a number or null")
        if key.startswith("holds/") and not (value is None or isinstance(value, bool)):
            raise ValueError(f"{name}: malformed premises record, {key!r} is {value!r}, not true, false or null")
    return record


# The measures of a base's row in the `bases` block, in column order ({k}: evals.premises.K).
BASES_MEASURES = ("premise/token_entropy", "premise/self_certainty_auroc", "premise/pass@1",
                  "premise/pass@{k}", "premise/maj@{k}")


def bases_table(root: Path = ROOT) -> str:
    """docs/bases.md: one row per base whose premises the premises stage measured (evals/premises.py,
    flows/premises.py): the default study's (`<root>/data/eval/base/premises.json`, `sharp
    (default)`), then each study's (`<root>/studies/<study>/data/eval/base/premises.json`, by folder
    name): its measures, pass@1 on leaked / clean items where the rows said which were leaked, and
    the premises that hold and that fail (`holds/<name>`; one whose measure is undefined, null, is
    in neither). Study folders without the record (a base built before the premises stage) are
    named in one line below. A malformed record raises a ValueError naming it."""
    from evals.premises import PREMISES, K

    def num(value) -> str:
        return "—" if value is None else f"{value:.3f}"

    order = {name: i for i, name in enumerate(PREMISES)}
    found = [("sharp (default)", root / "data" / "eval" / "base" / "premises.json")]
    studies = root / "studies"
    if studies.is_dir():
        found += [(folder.name, folder / "data" / "eval" / "base" / "premises.json")
                  for folder in sorted(studies.iterdir()) if folder.is_dir()]
    rows, missing = [], []
    for base, path in found:
        if not path.exists():
            missing.append(base)
            continue
        r = _premises_record(path, root)
        measures = [num(r[key.format(k=K)]) for key in BASES_MEASURES]
        leak = ("—" if "premise/pass@1_leaked" not in r and "premise/pass@1_clean" not in r
                else f"{num(r.get('premise/pass@1_leaked'))} / {num(r.get('premise/pass@1_clean'))}")
        verdicts = sorted((key.removeprefix("holds/") for key in r if key.startswith("holds/")),
                          key=lambda name: (order.get(name, len(order)), name))
        held = [f"`{name}`" for name in verdicts if r[f"holds/{name}"] is True]
        failed = [f"`{name}`" for name in verdicts if r[f"holds/{name}"] is False]
        rows.append(f"| {base} | " + " | ".join([*measures, leak]) + f" | {', '.join(held) or 'none'} | "
                    f"{', '.join(failed) or 'none'} |")
    note = f"Not measured yet: {', '.join(missing)}." if missing else ""
    if not rows:
        return "_No base's premises are measured yet (the premises stage, `python -m flows.premises`)._" + (
            f"\n\n{note}" if note else "")
    table = (f"| base | token entropy (nat) | self-certainty AUROC | pass@1 | pass@{K} | maj@{K} | "
             "pass@1 leaked / clean | premises that hold | premises that fail |\n"
             "|---|---:|---:|---:|---:|---:|---:|---|---|\n" + "\n".join(rows))
    return (table + "\n\nFrom `data/eval/base/premises.json` (the default study's base) and "
            "`studies/<study>/data/eval/base/premises.json` (evals/premises.py; the thresholds: "
            "docs/premises.md); —: undefined or not measured on that base; a premise whose measure "
            "is undefined there (null) is in neither column." + (f"\n\n{note}" if note else ""))


def base_arms_table(root: Path = ROOT, metric: str = "arith/pass@1") -> str:
    """docs/bases.md: what each arm scored on each engineered base (a study whose base's premises
    are measured, flows/report_answer.py `engineered_arms`, stale runs left out as the report
    does): per study, per arm, `metric` on the test split at each recorded seed, their mean and
    the mean minus the base's own evaluation (`eval/base/metrics.json`). One seed is a pilot, not a
    verdict: the claims (evals/claims.yaml) decide from their planned seeds."""
    from flows.report_answer import engineered_arms
    from flows.report_collect import collect_studies, current
    from flows.report_format import _signed  # the report's signed numbers (a true minus sign)

    rows = []
    for study, _, base, arms in engineered_arms(current(collect_studies(root / "studies")).runs, metric):
        for arm, seeds in arms:
            mean = sum(v for _, v in seeds) / len(seeds)
            gap = "—" if base is None else _signed(mean - base)
            rows.append(f"| {study} | `{arm}` | " + ", ".join(f"{v:.3f} (seed {s})" for s, v in seeds)
                        + f" | {mean:.3f} | {'—' if base is None else f'{base:.3f}'} | {gap} |")
    if not rows:
        return "_No arm has trained on an engineered base yet._"
    return (f"| base | arm | {metric} by seed | mean | the base's | mean − base |\n"
            "|---|---|---|---:|---:|---:|\n" + "\n".join(rows)
            + "\n\nFrom `studies/<study>/data/eval/<arm>/seed<S>/metrics.json` and the base's "
            "`eval/base/metrics.json` (test split). Fewer seeds than a claim plans are a pilot: the "
            "verdicts are the claims table's (README, reports/claims.json).")


BLOCKS = {"sampling": sampling_table, "sampling_profile": sampling_profile_table,
          "profile": profile_table, "sampler_study": sampler_study_block, "gpu_runs": gpu_runs_block,
          "gpu_memory": gpu_memory_block,
          "study_times": study_times_table, "rerun_record": rerun_record_block,
          "trl_rewards": trl_rewards_block, "bases": bases_table,
          "base_arms": base_arms_table}
# The pages holding generated blocks.
PAGES = (PAGE, ROOT / "docs" / "gpu.md", ROOT / "docs" / "report.md",
         ROOT / "docs" / "use_in_your_trainer.md", ROOT / "docs" / "bases.md")


def render(page: str) -> str:
    """`page` with every generated block it holds replaced by what the records give."""
    for name, make in BLOCKS.items():
        begin = f"<!-- {name}:begin (python -m benchmarks.tables) -->"
        end = f"<!-- {name}:end -->"
        head, sep, rest = page.partition(begin)
        if not sep:
            continue
        _, sep2, tail = rest.partition(end)
        if not sep2:
            raise ValueError(f"{PAGE}: {begin} has no {end}")
        page = f"{head}{begin}\n{make()}\n{end}{tail}"
    return page


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the page is not up to date")
    ap.add_argument("--page", type=Path, default=None,
                    help="one page (default: every page of PAGES)")
    args = ap.parse_args()
    stale = False
    for page in [args.page] if args.page else PAGES:
        text = page.read_text(encoding="utf-8")
        new = render(text)
        if args.check:
            if new != text:
                print(f"{page}: generated blocks are stale; run `python -m benchmarks.tables`")
                stale = True
            continue
        page.write_text(new, encoding="utf-8")
    if stale:
        sys.exit(1)


if __name__ == "__main__":
    main()
