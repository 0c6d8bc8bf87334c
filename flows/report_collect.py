"""What the `report` stage reads and concludes, before any drawing (flows/report.py renders it).

- `collect`: every run's metrics, per-item scores, curves and collapse events found under `data/`
  (nothing missing is fatal; what is off becomes a note), and the base it started from
  (`evals/lineage.py`: dvc.lock, run.json); `collect_studies` the same for the presets' own
  studies recorded under `studies/<preset>/data/` (runs `<preset>/<arm>`);
- `current`: only the runs of each study's current base (stale runs left out and named: a table
  never pools runs from different bases);
- `aggregate`: per method and metric, the mean, population std and number of seeds;
- `run_task`: the task a method trained on (its ranking, by label use and the claims' test, is
  flows/report_rank.py's `headline`);
- `provenance`: preset, git commit, date and seeds of the report, and why it is a smoke test of
  the pipeline rather than a result, if it is one (a tiny preset, tiny test sets, few steps).
"""

from __future__ import annotations

import functools
import math
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from core import paths
from core.io import read_json
from core.params import ROOT, Params
from evals.lineage import Lineages
from evals.registry import TASK_HEADLINE, headline_metrics  # noqa: F401 - re-exported
from tasks.stages import MATRIX, code_changes, run_of, stage_kind

# TASK_HEADLINE (evals/registry.py): the metrics a task is judged by (higher is better for each),
# first the one its methods are ranked by; a task missing there is judged by `<task>/pass@1`.
# Metrics without a benchmark prefix (`eval_seconds`) are grouped under this name.
OTHER = "other"
# A smoke test of the pipeline, not a result: a preset of one of these names, or one that trains
# fewer GRPO steps or scores fewer test items than this (the `ci` preset trains 2 steps and scores
# 8 items; the study 150 steps and 200 items). The data is checked too: a report built with the
# default params over a smoke run's files is still a smoke test.
SMOKE_PRESETS = ("micro", "ci", "smoke")
SMOKE_MAX_STEPS = 20
SMOKE_MIN_TEST = 50
_SEED_DIR = re.compile(r"^seed(-?\d+)$")
_DRAW_DIR = re.compile(r"^draw(\d+)$")


# ------------------------------------------------------------------------------ reading

@dataclass
class RunData:
    """Everything found for one (method, seed); `None`/empty where the file is missing."""

    metrics: dict | None = None
    train: list[dict] = field(default_factory=list)
    heldout: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    items: dict | None = None  # items.json: per-item test scores (evals/items.py), for the claims
    summary: dict | None = None  # run.json (flows/train.py), when the checkpoint folder is there
    test: list[dict] = field(default_factory=list)  # test.json: the test split at each checkpoint
    base: str = ""             # the base it started from (evals/lineage.py): md5:<hash> or unrecorded:<folder>
    stale: str = ""            # why it is not a run of its study's current base ("" when it is)
    # Its training stage's wall seconds from its study's committed stage times (studies/<name>/
    # times.json, times.plan.json), for the cost of more seeds where run.json is not in the record.
    train_seconds: float | None = None
    # The base's evaluation only: its premises record (data/eval/base/premises.json, the premises
    # stage), what a claim's `premise` reads (evals/claims_runs.py); None where absent.
    premises: dict | None = None


@dataclass
class Collected:
    """`runs[method][seed]` (seed `None` for `base`), in display order, and notes on what was off."""

    runs: dict[str, dict[int | None, RunData]]
    notes: list[str]
    left_out: list[str] = field(default_factory=list)  # stale runs `current` dropped, with why


def _under(data_dir: Path, canonical: Path) -> Path:
    """`canonical` (a `core.paths` location under the real `data/`) moved under `data_dir`.

    The layout stays defined once, in `core.paths`; tests and `--data-dir` only move its root.
    """
    return Path(data_dir) / canonical.relative_to(paths.DATA)


def _seed_dirs(folder: Path) -> Iterable[tuple[str, int]]:
    if not folder.is_dir():
        return
    for method_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        for seed_dir in sorted(p for p in method_dir.iterdir() if p.is_dir()):
            if m := _SEED_DIR.match(seed_dir.name):
                yield method_dir.name, int(m.group(1))


def discover(data_dir: Path, order: Sequence[str] = ()) -> list[tuple[str, int | None]]:
    """Every (method, seed) with anything under eval/, plots/ or checkpoints/, and `base` (seed
    None: its evaluation at the params' `seed`; seed d: its draw d).

    Order: `base` first, then the methods of `order` (params.methods), then the rest by name;
    seeds ascending.
    """
    found: set[tuple[str, int | None]] = set()
    for sub in ("eval", "plots", "checkpoints"):
        found.update(_seed_dirs(Path(data_dir) / sub))
    if (_under(data_dir, paths.eval_dir("base", None)) / "metrics.json").exists():
        found.add(("base", None))
    # The base's further sampling draws (params `base_draws`): base/draw<D>/.
    for f in _under(data_dir, paths.eval_dir("base", None)).glob("draw*/metrics.json"):
        if (m := _DRAW_DIR.match(f.parent.name)):
            found.add(("base", int(m.group(1))))
    rank = {name: i for i, name in enumerate(["base", *order])}
    return sorted(found, key=lambda ms: (rank.get(ms[0], len(rank)), ms[0],
                                         -1 if ms[1] is None else ms[1]))


def _read(path: Path, expect: type, notes: list[str]):
    """The JSON at `path` if it exists and has the expected shape, else None (noted if unreadable)."""
    if not path.exists():
        return None
    try:
        value = read_json(path)
    except (OSError, ValueError) as e:
        notes.append(f"{path}: unreadable ({type(e).__name__}: {e}); ignored")
        return None
    if not isinstance(value, expect):
        notes.append(f"{path}: expected a JSON {expect.__name__}, got {type(value).__name__}; ignored")
        return None
    return value


def collect(data_dir: Path = paths.DATA, order: Sequence[str] = (), folder: str = "") -> Collected:
    """Read every run's metrics, curves, collapse events and base; missing files are simply
    absent. `folder` names the study in an unrecorded base's group (default: the folder's name)."""
    notes: list[str] = []
    runs: dict[str, dict[int | None, RunData]] = {}
    lineages = Lineages(Path(data_dir), folder)
    for method, seed in discover(data_dir, order):
        run = RunData()
        run.metrics = _read(_under(data_dir, paths.eval_dir(method, seed)) / "metrics.json", dict, notes)
        run.items = _read(_under(data_dir, paths.eval_dir(method, seed)) / "items.json", dict, notes)
        if method == "base" and seed is None:
            run.premises = _read(_under(data_dir, paths.eval_dir(method, seed)) / "premises.json", dict, notes)
        if seed is not None and method != "base":  # a base draw has no training
            plots = _under(data_dir, paths.plots_dir(method, seed))
            run.train = [r for r in _read(plots / "train.json", list, notes) or [] if isinstance(r, dict)]
            run.heldout = [r for r in _read(plots / "heldout.json", list, notes) or []
                           if isinstance(r, dict)]
            # The test split at each checkpoint: read by the independent collapse label only
            # (flows/alarms.py), never by an alarm.
            run.test = [r for r in _read(plots / "test.json", list, notes) or [] if isinstance(r, dict)]
            if run.test and run.test[0].get("step") != 0:
                # Resumed before the test curve was checkpointed with the held-out state
                # (models/callbacks.py): its first point is not the base, so a label's course or
                # a rise-then-fall read from it would be wrong. Left out; the endpoints stand in.
                notes.append(f"{paths.run_key(method, seed)}: test curve starts at step "
                             f"{run.test[0].get('step')}, not at the base (a resumed run); left out")
                run.test = []
            summary = _read(_under(data_dir, paths.checkpoint_dir(method, seed)) / "run.json", dict, notes)
            run.summary = summary
            events = (summary or {}).get("collapse_events") or []
            run.events = [e for e in events if isinstance(e, dict) and number(e.get("step")) is not None]
            where = paths.run_key(method, seed)
            if run.metrics is None and not (run.train or run.heldout or summary):
                notes.append(f"{where}: nothing to report yet (no evaluation, curves or run.json)")
            if run.metrics is None and (run.train or run.heldout):
                notes.append(f"{where}: curves but no evaluation (data/eval/{where}/metrics.json)")
            if run.metrics is not None and not (run.train or run.heldout):
                notes.append(f"{where}: evaluated but no curves (data/plots/{where}/)")
        lineage = lineages.of(method, seed, run.summary)
        run.base, run.stale = lineage.base, lineage.stale
        runs.setdefault(method, {})[seed] = run
    return Collected(runs, notes)


def current(collected: Collected) -> Collected:
    """Only the runs of their study's current base; the stale ones are left out and listed in
    `left_out` ("rlme/seed1: trained from base 51512a08, ..."), for the report's first screen."""
    runs: dict[str, dict[int | None, RunData]] = {}
    left = list(collected.left_out)
    for method, seeds in collected.runs.items():
        for seed, run in seeds.items():
            if run.stale:
                left.append(f"{method if seed is None else paths.run_key(method, seed)}: {run.stale}")
            else:
                runs.setdefault(method, {})[seed] = run
    return Collected(runs, collected.notes, left)


def collect_studies(studies_dir: Path) -> Collected:
    """The presets' own studies recorded in `studies_dir/<preset>/data` (tasks/studies.py), read
    like `data/`: runs named `<preset>/<arm>` (and `<preset>/base`, its base), as
    evals/claims.yaml names them. They have other bases, so the report's headline ranking leaves
    them out; the claims and the collapse alarms read them."""
    runs: dict[str, dict[int | None, RunData]] = {}
    notes: list[str] = []
    for data in sorted(Path(studies_dir).glob("*/data")):
        preset = data.parent.name
        found = collect(data, folder=f"studies/{preset}")
        add_train_seconds(found.runs, data.parent)
        runs.update({f"{preset}/{method}": seeds for method, seeds in found.runs.items()})
        notes += [f"study {preset}: {note}" for note in found.notes]
    return Collected(runs, notes)


def with_studies(collected: Collected, data_dir: Path) -> Collected:
    """The default study's runs and the presets' own studies (studies/<preset>/, tasks/studies.py)
    as `<preset>/<arm>` runs: they stand on other bases, so the claims and the alarms read them and
    the headline ranking does not."""
    studies = collect_studies(Path(data_dir).parent / "studies")
    collected.notes.extend(studies.notes)
    return Collected({**collected.runs, **studies.runs}, collected.notes)


def add_train_seconds(runs: Mapping[str, Mapping[int | None, RunData]], study: Path) -> None:
    """Give each run of a study's record its training's wall seconds (`study_train_seconds`):
    a study's run.json has none, so its pipeline's times files are where they are recorded."""
    for (method, seed), seconds in study_train_seconds(study).items():
        if (run := runs.get(method, {}).get(seed)) is not None:
            run.train_seconds = seconds


def study_train_seconds(study: Path) -> dict[tuple[str, int], float]:
    """(method, seed) -> the wall seconds of its training stage as the study's pipeline recorded
    them, over every call of the record (`tasks.studies.recorded_calls`: `times.calls.json`, or
    `times.json` then `times.plan.json` for the seeds the plan added), stages that ran only
    (one restored or kept from the record did not train here). Unreadable files are skipped.

    >>> import json, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "times.json").write_text(json.dumps({"stages": {
    ...     "train@a-0": {"action": "run", "seconds": 90.5}, "train@a-1": {"action": "restore", "seconds": 2},
    ...     "evaluate@a-0": {"action": "run", "seconds": 9}}}))
    >>> extra = {"stages": {"train_extra@a-3": {"action": "run", "seconds": 80}}}
    >>> _ = (d / "times.plan.json").write_text(json.dumps(extra))
    >>> study_train_seconds(d)
    {('a', 0): 90.5, ('a', 3): 80.0}
    """
    from tasks.studies import recorded_calls

    out: dict[tuple[str, int], float] = {}
    try:
        calls = recorded_calls(study)
    except (OSError, ValueError):
        return out
    for times in (t for call in calls for t in (call.get("times"), call.get("plan")) if isinstance(t, dict)):
        stages = times.get("stages")
        for stage, rec in stages.items() if isinstance(stages, dict) else ():
            if ((m := MATRIX.match(stage)) and stage_kind(stage) == "train" and isinstance(rec, dict)
                    and rec.get("action") == "run" and (sec := number(rec.get("seconds"))) is not None):
                out[(m["method"], int(m["seed"]))] = sec
    return out


def number(value) -> float | None:
    """A finite float, or None for anything else (None, NaN, inf, strings, booleans).

    >>> [number(v) for v in (3, 0.5, True, float("nan"), "1", None)]
    [3.0, 0.5, None, None, None, None]
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------------------ aggregates

def aggregate(collected: Collected) -> dict[str, dict]:
    """Per method and metric: mean, population std and the number of seeds with a finite value."""
    agg: dict[str, dict] = {}
    for method, seeds in collected.runs.items():
        evaluated = [r.metrics for r in seeds.values() if r.metrics is not None]
        if not evaluated:
            continue
        keys = sorted({k for m in evaluated for k in m})
        agg[method] = {k: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                       for k in keys
                       if (v := [x for m in evaluated if (x := number(m.get(k))) is not None])}
    return agg


def benchmark_of(key: str) -> tuple[str, str]:
    """`arith/pass@1` -> (`arith`, `pass@1`); a key without a prefix belongs to `other`."""
    bench, sep, metric = key.partition("/")
    return (bench, metric) if sep else (OTHER, key)


def is_count_name(key: str) -> bool:
    """A metric named as a count: `n`, `arith/n`, `n_items`, `items_n`.

    >>> [is_count_name(k) for k in ("arith/n", "self_eval/n", "n", "arith/pass@1", "train/length")]
    [True, True, True, False, False]
    """
    name = key.rpartition("/")[2]
    return name == "n" or name.startswith("n_") or name.endswith("_n")


def count_keys(collected: Collected) -> set[str]:
    """Metrics that are counts, printed as integers: named as one, or written as JSON integers by
    every run (a rate is written as a float, even 0.0)."""
    seen: dict[str, bool] = {}
    for seeds in collected.runs.values():
        for run in seeds.values():
            for key, value in (run.metrics or {}).items():
                if number(value) is not None:
                    seen[key] = seen.get(key, True) and isinstance(value, int)
    return {k for k, ints in seen.items() if ints or is_count_name(k)}


# ------------------------------------------------------------------------------ the answer

def _heldout_task(collected: Collected, method: str) -> str | None:
    """The task a method's held-out curves measure (the train stage samples only its own task)."""
    benches = {benchmark_of(k)[0] for run in collected.runs.get(method, {}).values()
               for row in run.heldout for k, v in row.items() if number(v) is not None}
    tasks = [b for b in benches if b in TASK_HEADLINE]
    return tasks[0] if len(tasks) == 1 else None


def run_task(data_dir: Path, method: str, collected: Collected | None = None,
             params: Params | None = None) -> str:
    """The task a method trained on: its resolved settings (`data/runs/<method>/train.json`,
    flows/configure.py), else the benchmark its held-out curves measure, else params, else arith.

    `data/runs/` is a DVC output, absent from a fresh clone; the curves are committed.
    """
    f = Path(data_dir) / "runs" / method / "train.json"
    try:
        return read_json(f)["grpo"]["task"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if collected is not None and (task := _heldout_task(collected, method)):
        return task
    if params is not None:
        try:
            return params.method_grpo(method).task
        except (ValueError, KeyError):
            pass
    return "arith"


# ------------------------------------------------------------------------------ provenance

@dataclass
class Provenance:
    """Where the report's numbers come from; `smoke` lists why it is not a result (empty: it is)."""

    preset: str | None
    commit: str
    dirty: bool
    date: str
    seeds: list[int]
    planned_seeds: list[int] | None
    methods: int
    base_model: dict | None
    smoke: list[str]
    left_out: list[str] = field(default_factory=list)  # stale runs no table or claim pools
    outdated: str = ""  # `outdated_summary`: runs recorded with code or settings HEAD has changed
    outdated_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # `outdated_runs`


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def smoke_reasons(params: Params | None, collected: Collected) -> list[str]:
    """Why these numbers are a smoke test of the pipeline: the preset, and what the data shows."""
    reasons = []
    if params is not None:
        small = []
        if params.grpo.max_steps < SMOKE_MAX_STEPS:
            small.append(f"grpo.max_steps = {params.grpo.max_steps}")
        if params.eval.n_test < SMOKE_MIN_TEST:
            small.append(f"eval.n_test = {params.eval.n_test}")
        if params.preset in SMOKE_PRESETS or small:
            reasons.append(f"preset `{params.preset or 'default'}` is a smoke test"
                           + (f" ({', '.join(small)})" if small else ""))
    sizes: dict[str, int] = {}
    for seeds in collected.runs.values():
        for run in seeds.values():
            for k, v in (run.metrics or {}).items():
                if benchmark_of(k)[1] == "n" and (x := number(v)) is not None:
                    sizes[k] = min(sizes.get(k, int(x)), int(x))
    tiny = sorted(k for k, v in sizes.items() if v < SMOKE_MIN_TEST)
    if tiny:
        reasons.append(f"tiny test sets: {', '.join(f'{k} = {sizes[k]}' for k in tiny)} "
                       f"(fewer than {SMOKE_MIN_TEST} items)")
    steps = [x for seeds in collected.runs.values() for run in seeds.values()
             for row in run.train + run.heldout if (x := number(row.get("step"))) is not None]
    if steps and max(steps) < SMOKE_MAX_STEPS:
        reasons.append(f"at most {int(max(steps))} GRPO steps (fewer than {SMOKE_MAX_STEPS})")
    return reasons


def provenance(params: Params | None, collected: Collected, data_dir: Path,
               now: datetime | None = None) -> Provenance:
    """The report's header: the params' preset, the code's commit, the date, the seeds found."""
    info = _read(Path(data_dir) / "base_model_info.json", dict, [])
    return Provenance(
        preset=params.preset if params is not None else None,
        commit=_git("rev-parse", "--short=7", "HEAD") or "unknown",
        # Code or params that differ from the commit; the results the pipeline rewrites do not count.
        dirty=bool(code_changes(_git("status", "--porcelain", "--untracked-files=no"))),
        date=(now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        seeds=sorted({s for seeds in collected.runs.values() for s in seeds if s is not None}),
        planned_seeds=list(params.seeds) if params is not None else None,
        methods=sum(1 for m in collected.runs if m != "base"),
        base_model=info,
        smoke=smoke_reasons(params, collected),
    )


# ------------------------------------------------------------------------------ code of record

def config_md5(config: dict) -> str:
    """The md5 of a run file as `flows/configure.py` writes it (core.io.write_json's bytes), the
    hash dvc.lock records for the `data/runs/<method>/*.json` a stage depends on."""
    import hashlib
    import json

    return hashlib.md5(json.dumps(config, indent=2, sort_keys=True).encode("utf-8")).hexdigest()


def run_file_md5s(params: Params, methods: Sequence[str]) -> dict[str, str]:
    """`data/runs/...json` -> the md5 HEAD's code and `params` give it: what `configure` would
    write now for each of `methods` (train.json, evaluate.json) and the base's evaluation. A method
    `params` cannot resolve any more is left out (its runs are not compared)."""
    from flows.configure import evaluate_config, train_config

    out = {"data/runs/base/evaluate.json": config_md5(evaluate_config(params, None))}
    for method in methods:
        try:
            train, evaluate = train_config(params, method), evaluate_config(params, method)
        except Exception:  # noqa: BLE001 - a method no longer defined: nothing to compare
            continue
        out[f"data/runs/{method}/train.json"] = config_md5(train)
        out[f"data/runs/{method}/evaluate.json"] = config_md5(evaluate)
    return out


def outdated_stages(lock: Path, want: dict[str, str]) -> list[str]:
    """The train and evaluate stages of `lock` whose run file (`data/runs/<method>/*.json`: the
    run's settings and the digest of the code it imports) differs from `want`: DVC would run
    them again at HEAD. Stages whose run file `want` does not name are not judged.

    >>> import tempfile, yaml
    >>> d = Path(tempfile.mkdtemp()) / "dvc.lock"
    >>> dep = lambda m, k, h: {"path": f"data/runs/{m}/{k}.json", "md5": h}
    >>> _ = d.write_text(yaml.safe_dump({"stages": {
    ...     "train@a-0": {"deps": [dep("a", "train", "x")]}, "train_extra@a-3": {"deps": [dep("a", "train", "y")]},
    ...     "evaluate@a-0": {"deps": [dep("a", "evaluate", "e")]}, "train@b-0": {"deps": [dep("b", "train", "z")]}}}))
    >>> outdated_stages(d, {"data/runs/a/train.json": "x", "data/runs/a/evaluate.json": "E"})
    ['evaluate@a-0', 'train_extra@a-3']
    """
    from evals.lineage import read_lock

    out = []
    for name, stage in sorted(read_lock(lock).items()):
        if not ((MATRIX.match(name) or stage_kind(name).startswith("evaluate_base"))
                and isinstance(stage, dict)):
            continue
        deps = [d for d in stage.get("deps") or [] if isinstance(d, dict)]
        if any(d.get("path") in want and d.get("md5") != want[d["path"]] for d in deps):
            out.append(name)
    return out


def outdated_runs(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """Per study ("default", or a record's name under studies/): how many of its recorded
    trainings and evaluations ran with settings or code that HEAD has changed since (their run
    file in the study's dvc.lock differs from what `configure` writes now); stale runs (another
    base: `evals/lineage.py`), already left out of every table, are not counted. The report shows
    these runs as recorded and says how many there are: a table of them is the result of an
    older commit's code, which `make study` / `--study` would train again."""
    from core.params import load, validate
    from evals.claims import parse_study
    from tasks.studies import recorded, study_params

    if not ((Path(root) / "params.yaml").is_file() and (Path(root) / "dvc.lock").is_file()):
        return {}  # not a checkout of the lab (a test's folder): nothing recorded to judge
    studies: dict[str, tuple[Path, Params, Sequence[str]]] = {}
    params = load(Path(root) / "params.yaml")
    studies["default"] = (Path(root) / "dvc.lock", params, list(params.methods))
    for name, study in recorded(Path(root)).items():
        preset, base_seed = parse_study(name)
        methods = list(study.get("methods") or [])
        try:
            raw = study_params(Path(root), preset or None, methods, base_seed)
            studies[name] = (Path(root) / "studies" / name / "dvc.lock",
                             validate(raw, f"studies/{name}", preset or None), methods)
        except Exception:  # noqa: BLE001 - a preset since removed: its record is not judged
            continue
    out: dict[str, dict[str, int]] = {}
    import flows.configure as configure

    # Every study asks for the same import closures: digest each once (the files cannot change
    # while the report reads them), then give configure its own function back.
    digest = configure.code_digest
    cached = functools.lru_cache(maxsize=None)(lambda entries: digest(list(entries)))

    def once(entries: Iterable[str], root: Path = ROOT) -> str:
        return cached(tuple(entries)) if root == ROOT else digest(entries, root)

    configure.code_digest = once
    try:
        found = {name: outdated_stages(lock, run_file_md5s(p, methods))
                 for name, (lock, p, methods) in studies.items()}
    finally:
        configure.code_digest = digest
    for name, stages in found.items():
        # A stale run (another base) is already left out of every table, and named: not counted.
        lineages = Lineages(studies[name][0].parent / "data")
        shown = [s for s in stages if not lineages.of(*run_of(s)).stale]
        counts = {kind: sum(stage_kind(s) == kind or (kind == "evaluate" and stage_kind(s).startswith("evaluate_base"))
                            for s in shown) for kind in ("train", "evaluate")}
        if any(counts.values()):
            out[name] = counts
    return out


def outdated_summary(outdated: dict[str, dict[str, int]]) -> str:
    """One sentence for the first screen ('' when every recorded run is at HEAD's code).

    >>> s = outdated_summary({"default": {"train": 98, "evaluate": 99},
    ...                       "hint_copier": {"train": 0, "evaluate": 3}})
    >>> s.split("as recorded): ", 1)[1]
    'default: 98 trainings, 99 evaluations; hint_copier: 3 evaluations.'
    """
    if not outdated:
        return ""
    parts = []
    for name, counts in outdated.items():
        kinds = [f"{n} {kind}{'s' * (n != 1)}" for kind, n in
                 (("training", counts.get("train", 0)), ("evaluation", counts.get("evaluate", 0))) if n]
        parts.append(f"{name}: {', '.join(kinds)}")
    return ("Runs recorded before a change to their code or settings (their run file in dvc.lock "
            "is not HEAD's, so the study would run them again; the tables show them as recorded): "
            + "; ".join(parts) + ".")
