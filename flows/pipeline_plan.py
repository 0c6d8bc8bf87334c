"""What a pipeline call will do before it does it: the claims' plan of seeds (`study_plan`), and for
`--dry-run` which stages would run, why, and how long that takes here (`what_runs`, `dry_run_text`).

The dry run asks DVC, as the run will: every stage's status against dvc.lock (`stage_changes`:
outputs not on this disk, inputs changed, a changed command or params). A stage whose outputs
are not here runs again (no checkpoint is in git, and without a DVC remote nothing can be pulled);
a stage that reads a training's or an evaluation's outputs runs after it, since those change on
every run (new weights, the wall times in run.json and metrics.json); a stage that reads another
stage that runs may find what it reads rebuilt identically (prepare, configure), so it "may run".
The time is the committed stage times (reports/times/, this checkout's reports/last_run/, and the
default study's records on a second base, studies/default.seed*/) scheduled as the pipeline
schedules them (`wall_seconds`).
"""

from __future__ import annotations

import contextlib
import statistics
from pathlib import Path

from core.params import ROOT
from flows.pipeline_schedule import LAST_RUN, TIMES, deepest_first, depths, recorded_seconds
from tasks import stages as st

# A stage of these kinds writes something new every time it runs (a training's weights, and the
# wall time in run.json / metrics.json), so whatever reads it runs after it.
ALWAYS_NEW = ("train", "evaluate", "evaluate_base", "evaluate_base_draw")
# A stage's own reasons to run, by kind, in the order the dry run prints them.
REASONS = {"missing": "an output is not on this disk",
           "changed": "an input, output, command or param changed since dvc.lock",
           "after": "a stage it reads runs first and writes something new"}


def plan_text(name: str, planned: dict[str, int], extra: dict[str, dict], cost: str) -> str:
    """The plan in a few lines: seeds per arm, the seeds it adds, what they cost (`evals.claims`
    says "nothing to run" when every planned seed has a recorded run: said as that, since a
    checkout without their checkpoints trains them again).

    >>> print(plan_text("", {"rlme": 5, "rlvr": 3}, {"rlme-3": {"method": "rlme", "seed": 3},
    ...                  "rlme-4": {"method": "rlme", "seed": 4}}, "2 more runs"))
    plan (default study, from the pilot seeds): rlme 5 seeds, rlvr 3 seeds
      adds rlme seeds 3, 4; cost: 2 more runs
    >>> plan_text("", {"a": 4}, {"a-3": {"method": "a", "seed": 3}}, "nothing to run").splitlines()[1]
    '  adds a seeds 3; cost: none beyond the recorded runs (each planned seed has one)'
    """
    head = (f"plan ({name or 'default'} study, from the pilot seeds): "
            + (", ".join(f"{a} {n} seeds" if n else f"{a} waits for its claim's preconditions"
                         for a, n in planned.items()) or "no arm of it is in a claim"))
    adds: dict[str, list[int]] = {}
    for run in extra.values():
        adds.setdefault(run["method"], []).append(run["seed"])
    more = "; ".join(f"{a} seeds {', '.join(map(str, s))}" for a, s in adds.items())
    if cost == "nothing to run":
        cost = "none beyond the recorded runs (each planned seed has one)"
    return head + "\n  " + (f"adds {more}; cost: {cost}" if adds else "adds no seed beyond the pilot")


# The seeds-by-plan helpers read runs the way the report does (flows/report_collect.py), so
# they live here, above tasks/ (which imports nothing from flows/).
def study_runs(data_dir: Path, name: str = "", root: Path = ROOT) -> dict:
    """The runs under a study's `data_dir` (its lineage read from the dvc.lock beside it), named
    as evals/claims.yaml names them: `<name>/<arm>` outside the default study. A preset's runs
    get their training times from its record's times files (`studies/<name>/` under `root`), as
    the report gives them, so the plan's cost counts the trainings."""
    from flows.report_collect import add_train_seconds, collect
    from tasks.studies import record_dir

    found = collect(Path(data_dir), folder=f"studies/{name}" if name else "")
    if name:
        add_train_seconds(found.runs, record_dir(name, Path(root)))
    prefix = f"{name}/" if name else ""
    return {prefix + method: seeds for method, seeds in found.runs.items()}


def study_plan(root: Path, name: str, methods: list[str], seeds: list[int],
               data_dir: Path | None = None, named: bool = False
               ) -> tuple[dict[str, int], dict[str, dict], str]:
    """The study's plan from its pilot: seeds per arm (`evals.claims.planned_seeds`, arms of
    `methods` only), the `extra_runs` that run it, and what the runs not yet made cost. A claim
    may read runs of other studies (a precondition measured in a preset's study): their records
    in `studies/` are read beside this study's own runs, as the report reads them. `named`
    (a `--methods` call): a control shared with arms not named gets the seeds the named arms'
    comparisons need (`evals.claims.seed_plan`). A preset's study reads the default study's runs
    too (the `data/` of the checkout its workspace belongs to): a precondition measured on the
    default arms (gates_and_filter_add: the gates fire on arith) holds for its plan as it holds
    in the report, not undecided for want of them."""
    from evals.claims import extra_runs, plan_cost, planned_seeds, study_of
    from flows.report_collect import collect_studies
    from tasks.studies import main_checkout

    others = collect_studies(Path(root) / "studies").runs
    if name:
        main = main_checkout(root)
        others = {**study_runs(main / "data", "", main), **others}
    runs = {**{a: r for a, r in others.items() if study_of(a) != name},
            **study_runs(data_dir or Path(root) / "data", name, root)}
    planned = {a: n for a, n in planned_seeds(runs, name, methods=methods if named else None).items()
               if a in methods}
    return planned, extra_runs(planned, seeds), plan_cost(runs, name, planned)


# ------------------------------------------------------------------------------ the dry run

def stage_changes(stages: list[str], root: Path = ROOT) -> tuple[dict[str, dict], dict[str, str], list[str]]:
    """DVC's status of each of `stages` against dvc.lock, read in one pass (as `dvc status`):
    stage -> {"deps": {path: state}, "outs": {path: state}, "other": [...]} (a params key is
    `params.yaml: <key>`; "other": a changed command, an always-changed stage); every output
    path -> the stage that writes it; and the DVC remotes configured."""
    from dvc.repo import Repo

    out: dict[str, dict] = {}
    with contextlib.chdir(root), Repo(str(root)) as repo, repo.lock:
        index = {s.addressing: s for s in repo.index.stages}
        writers = {str(o.def_path): name for name, s in index.items() for o in s.outs}
        for name in stages:
            found: dict = {"deps": {}, "outs": {}, "other": []}
            stage = index.get(name)
            items = next(iter(stage.status().values()), []) if stage is not None else ["not in dvc.yaml"]
            for item in items:
                if not isinstance(item, dict):
                    found["other"].append(str(item))
                    continue
                for key, changes in item.items():
                    where = {"changed deps": "deps", "changed outs": "outs"}.get(key)
                    if where is None or not isinstance(changes, dict):
                        found["other"].append(key)
                        continue
                    for path, state in changes.items():
                        for sub, value in (state.items() if isinstance(state, dict) else [("", state)]):
                            found[where][f"{path}: {sub}" if sub else path] = str(value)
            out[name] = found
        remotes = sorted(repo.config.get("remote", {}))
    return out, writers, remotes


def _writer(path: str, writers: dict[str, str]) -> str | None:
    """The stage whose output holds `path` (the output itself or a folder above it)."""
    for out, stage in writers.items():
        if path == out or path.startswith(out.rstrip("/") + "/"):
            return stage
    return None


def what_runs(graph: dict[str, set[str]], order: list[str], changes: dict[str, dict],
              writers: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each stage of `order` that runs or may: stage -> (kind, why), kind one of `missing`,
    `changed`, `after` (it runs) or `may` (it runs if a stage it reads rebuilds something else).

    >>> g = {"prepare": set(), "train@a-0": {"prepare"}, "evaluate@a-0": {"train@a-0"}, "report": {"evaluate@a-0"}}
    >>> changes = {"prepare": {"deps": {}, "outs": {"data/prepared": "not in cache"}, "other": []},
    ...            "train@a-0": {"deps": {"data/prepared": "deleted"}, "outs": {"ck/final": "deleted"}, "other": []},
    ...            "evaluate@a-0": {"deps": {"ck/final": "deleted"}, "outs": {}, "other": []},
    ...            "report": {"deps": {}, "outs": {}, "other": []}}
    >>> w = {"data/prepared": "prepare", "ck/final": "train@a-0"}
    >>> for s, why in what_runs(g, list(g), changes, w).items(): print(s, why)
    prepare ('missing', 'data/prepared: not in cache')
    train@a-0 ('missing', 'ck/final: deleted')
    evaluate@a-0 ('after', 'train@a-0')
    report ('after', 'evaluate@a-0')
    """
    chosen = set(order)
    out: dict[str, tuple[str, str]] = {}
    for s in order:
        c = changes.get(s, {"deps": {}, "outs": {}, "other": []})
        missing = [f"{p}: {v}" for p, v in c["outs"].items() if v in ("deleted", "not in cache")]
        changed = ([f"{p}: {v}" for p, v in c["outs"].items() if v not in ("deleted", "not in cache")]
                   + [f"{p}: {v}" for p, v in c["deps"].items()
                      if v != "deleted" or _writer(p.split(": ")[0], writers) not in chosen]
                   + list(c["other"]))
        upstream = sorted(graph[s] & chosen & set(out))
        new = [u for u in upstream if out[u][0] != "may" and st.stage_kind(u) in ALWAYS_NEW]
        if missing:
            out[s] = ("missing", ", ".join(missing))
        elif changed:
            out[s] = ("changed", ", ".join(changed))
        elif new:
            out[s] = ("after", ", ".join(new))
        elif upstream:
            out[s] = ("may", ", ".join(upstream))
    return out


def expected_seconds(root: Path = ROOT) -> tuple[dict[str, float], list[str]]:
    """Each stage's longest recorded wall time here: `make run`'s and `make study`'s record
    (reports/times/), this checkout's last calls (reports/last_run/) and the default study's
    records on another base (studies/default.seed*/: the same stages); and where they came from."""
    from tasks import studies

    seconds = recorded_seconds(root / TIMES.relative_to(ROOT), root / LAST_RUN.relative_to(ROOT))
    sources = [str(TIMES.relative_to(ROOT)) + "/"]
    for rec in sorted((root / studies.RECORDS).glob("default.seed*")):
        for stage, t in studies.recorded_stage_seconds(rec).items():
            seconds[stage] = max(seconds.get(stage, 0.0), t)
        sources.append(str(rec.relative_to(root)) + "/")
    return seconds, sources


def estimate(stages: list[str], seconds: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """Each stage's expected seconds: its recorded time, else the longest recorded time of the
    same kind and method (another seed), else the median of its kind's; and the stages with none.

    >>> estimate(["train@a-1", "train@b-0", "x"], {"train@a-0": 300.0, "train@c-0": 100.0})
    ({'train@a-1': 300.0, 'train@b-0': 200.0}, ['x'])
    """
    by_arm: dict[tuple[str, str], float] = {}
    by_kind: dict[str, list[float]] = {}
    for stage, took in seconds.items():
        m = st.MATRIX.match(stage)
        if m:
            key = (st.stage_kind(stage), m["method"])
            by_arm[key] = max(by_arm.get(key, 0.0), took)
        by_kind.setdefault(st.stage_kind(stage), []).append(took)
    out: dict[str, float] = {}
    unknown: list[str] = []
    for s in stages:
        m = st.MATRIX.match(s)
        t: float | None = seconds.get(s) or (by_arm.get((st.stage_kind(s), m["method"])) if m else None)
        if not t and by_kind.get(st.stage_kind(s)):
            t = statistics.median(by_kind[st.stage_kind(s)])
        if t:
            out[s] = t
        else:
            unknown.append(s)
    return out, unknown


def wall_seconds(graph: dict[str, set[str]], order: list[str], cost: dict[str, float], limit: int) -> float:
    """How long `order` takes with `limit` stages at once, each taking `cost` seconds (a stage not
    in it is up to date: it takes none), scheduled as the pipeline does (`deepest_first`).

    >>> g = {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}
    >>> wall_seconds(g, list(g), {"a": 10, "b": 30, "c": 20, "d": 5}, 2)
    45.0
    >>> wall_seconds(g, list(g), {"b": 30, "c": 20}, 1)
    50.0
    """
    chosen, depth = set(order), depths(graph, order)
    done: set[str] = set()
    pending, now = list(order), 0.0
    running: list[tuple[float, str]] = []
    while pending or running:
        ready = [s for s in pending if graph[s] & chosen <= done]
        if instant := [s for s in ready if not cost.get(s)]:
            done.update(instant)
            pending = [s for s in pending if s not in instant]
            continue
        for s in deepest_first(ready, depth, cost)[:max(0, limit - len(running))]:
            pending.remove(s)
            running.append((now + cost[s], s))
        if not running:  # nothing ready and nothing running: not a DAG of `order`
            break
        running.sort()
        now, s = running.pop(0)
        done.add(s)
    return float(now)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _first(why: str) -> str:
    """The first of a stage's reasons, and how many more."""
    items = why.split(", ")
    return items[0] + (f", {len(items) - 1} more" if len(items) > 1 else "")


def _some(items: list[str], shown: int = 3) -> str:
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


def dry_run_text(graph: dict[str, set[str]], order: list[str], limit: int, root: Path = ROOT) -> str:
    """What bringing `order` up to date does here: the stages that run and why, grouped, and how
    long it takes at `limit` stages at once from the recorded stage times."""
    changes, writers, remotes = stage_changes(order, root)
    runs = what_runs(graph, order, changes, writers)
    fetch = (f"DVC remote {', '.join(remotes)}: `dvc pull` may fetch missing outputs first" if remotes
             else "no DVC remote here: an output not in git is rebuilt, never pulled")
    lines = [f"dry run: {len(order)} stages; {sum(k != 'may' for k, _ in runs.values())} run, "
             f"{sum(k == 'may' for k, _ in runs.values())} may run, {len(order) - len(runs)} up to date "
             f"(DVC's status against dvc.lock; {fetch})"]
    for kind, what in (*REASONS.items(), ("may", "may run: a stage it reads runs first; it runs if "
                                                  "that rebuilds something other than dvc.lock records")):
        named = [s for s in order if runs.get(s, ("",))[0] == kind]
        if named:
            head = what if kind == "may" else f"run: {what}"
            lines.append(f"  {len(named)} {head}: " + _some([f"{s} ({_first(runs[s][1])})" for s in named]))
    seconds, sources = expected_seconds(root)
    sure = [s for s in order if s in runs and runs[s][0] != "may"]
    cost, unknown = estimate([s for s in order if s in runs], seconds)
    if not runs:
        lines.append("  time: none, every stage is up to date")
        return "\n".join(lines)
    wall = wall_seconds(graph, order, {s: t for s, t in cost.items() if s in sure}, limit)
    upper = wall_seconds(graph, order, cost, limit)
    lines.append(f"  time: about {_hours(wall)} here at {limit} stage(s) at once"
                 + (f" (up to {_hours(upper)} if the stages that may run do)" if upper > wall + 60 else "")
                 + f"; {_hours(sum(cost.get(s, 0.0) for s in sure))} of stage time, from the recorded "
                 f"stage times ({', '.join(sources)}, {LAST_RUN.relative_to(ROOT)}/)"
                 + (f"; no recorded time for {_some(unknown)}" if unknown else ""))
    return "\n".join(lines)
