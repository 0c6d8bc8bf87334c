"""The first screen's answer before any drawing: which reward can be trusted without labels.

Per task some method trained on (`headline`):

- **What each method reads** (`label_uses`), from docs/methods/label_use.json, the table
  tests/test_label_use.py measures by changing one input field at a time: a field of kind `label`
  is a label, one of kind `reference` a reference text. A method is **label-free** when it reads
  neither, **reads references** when it reads a reference text and no label, **reads labels**
  otherwise. A method the table does not list (a variant) takes its family's group when every
  measured method of that family reads alike (said: "as <family>"), else its label use is
  **not measured**. No method is named here: the groups come from the measured table.
- **Ranked within each group** by the task's first headline metric (mean over seeds). The group's
  best is marked; a method is **tied** with it only where the claims' own test cannot separate
  the two (`separate`): `evals.stats.seed_item_t` on per-item scores (the items scored in every
  run of both arms, seeds unpaired), or Welch's t-interval (`t_estimate`) on the per-seed values
  when a run lacks per-item scores, exactly as evals/claims.py decides a comparison, from the
  claims' minimum seeds per arm (`MIN_SEEDS` per item, `MIN_SEEDS_PER_RUN` per run); with fewer,
  the pair is untested: neither tied nor separated.
- **The ceiling** is the best method that reads labels, **the floor** the base; the label-free
  best is tested against the ceiling the same way.
- **Collapse** is the lab's collapse label (flows/alarms.py, `independent`: the test split, which
  no alarm reads), seeds collapsed of seeds labelled, beside the lab detector's alarms on the same
  runs (`Collapse`).

The report (flows/report.py `build`) and `make results` (flows/report_readme.py `write_readme`)
read the records through one `gather`, so the README's table and the report's agree, and a stale
run (another base, evals/lineage.py) is left out of both the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.io import DataError, read_json
from core.params import ROOT, Params
from evals.claims import MIN_SEEDS, MIN_SEEDS_PER_RUN, TEST_ITEMS
from evals.items import item_scores
from evals.stats import seed_item_t, t_estimate
from flows import alarms as alarms_
from flows.report_collect import (
    TASK_HEADLINE,
    Collected,
    RunData,
    aggregate,
    collect,
    current,
    headline_metrics,
    number,
    outdated_runs,
    run_task,
    with_studies,
)
from models.collapse import CollapseConfig

LABEL_USE = ROOT / "docs" / "methods" / "label_use.json"
LABEL_FREE, REFERENCES, LABELS, UNMEASURED = ("label-free", "reads references", "reads labels",
                                              "not measured")
GROUPS = (LABEL_FREE, REFERENCES, LABELS, UNMEASURED)  # the order of the first screen
GROUP_TITLES = {LABEL_FREE: "label-free: reads no label and no reference",
                REFERENCES: "reads reference texts, no label",
                LABELS: "reads labels (the ceiling: the best of them)",
                UNMEASURED: "label use not measured (docs/methods/label_use.json lists neither it "
                            "nor a family that reads alike)"}
WELCH = "Welch t-interval on per-seed values"
# The lab's collapse label, as the first screen and the README name it (flows/alarms.py).
COLLAPSE_LABEL = "test-split label"


# ------------------------------------------------------------------------------ label use

@dataclass(frozen=True)
class Use:
    """What a method reads: its group, the fields it reads (label_use.json's names, a field of
    kind `prompt` named `prompt`: the reward is conditioned on the prompt text) and, when
    inferred, the family it was inferred from."""

    group: str
    reads: tuple[str, ...] = ()
    family: str = ""  # set when the table does not list the method and its family gave the group

    def text(self) -> str:
        """`answer, prompt`; `nothing`; `reference, prompt (as dro)`; `not measured`."""
        if self.group == UNMEASURED:
            return "not measured"
        return (", ".join(self.reads) or "nothing") + (f" (as {self.family})" if self.family else "")


def read_label_use(path: Path = LABEL_USE) -> dict:
    """label_use.json (`fields`: name -> kind; `methods`: name -> family and fields read); a
    malformed file raises DataError naming the file and what is wrong."""
    table = read_json(path)
    fields, methods = (table.get("fields"), table.get("methods")) if isinstance(table, dict) else (None, None)
    if not isinstance(fields, dict) or not isinstance(methods, dict):
        raise DataError(f"{path}: expected {{'fields': {{...}}, 'methods': {{...}}}} "
                        "(python -m tests.test_label_use --write measures it)")
    for name, m in methods.items():
        if not (isinstance(m, dict) and isinstance(m.get("reads"), dict)
                and all(f in fields for f in m["reads"])):
            raise DataError(f"{path}: method {name}: expected 'reads' of fields the file describes")
    return table


def _use(reads: Mapping[str, bool], kinds: Mapping[str, str], family: str = "") -> Use:
    read = [f for f, hit in reads.items() if hit]
    found = {kinds.get(f) for f in read}
    group = LABELS if "label" in found else REFERENCES if "reference" in found else LABEL_FREE
    named = [f for f in read if kinds.get(f) != "prompt"] + (["prompt"] if "prompt" in found else [])
    return Use(group, tuple(named), family)


def label_uses(methods: Iterable[str], table: Mapping, family_of: Callable[[str], str | None]) -> dict[str, Use]:
    """Each of `methods`' Use: measured, as its family when every measured member of the family
    reads alike, else not measured.

    >>> table = {"fields": {"answer": {"kind": "label"}, "hint": {"kind": "prompt"}},
    ...          "methods": {"a": {"family": "a", "reads": {"answer": True, "hint": False}},
    ...                      "b": {"family": "b", "reads": {"answer": False, "hint": True}},
    ...                      "b2": {"family": "b", "reads": {"answer": True, "hint": True}}}}
    >>> uses = label_uses(["a", "b", "a_long", "b_long", "x"], table,
    ...                   {"a_long": "a", "b_long": "b"}.get)
    >>> [(m, u.group, u.text()) for m, u in uses.items()]  # doctest: +NORMALIZE_WHITESPACE
    [('a', 'reads labels', 'answer'), ('b', 'label-free', 'prompt'),
     ('a_long', 'reads labels', 'answer (as a)'), ('b_long', 'not measured', 'not measured'),
     ('x', 'not measured', 'not measured')]
    """
    kinds = {f: spec.get("kind", "") if isinstance(spec, dict) else "" for f, spec in table["fields"].items()}
    measured = {m: _use(spec["reads"], kinds) for m, spec in table["methods"].items()}
    by_family: dict[str, set[tuple[str, tuple[str, ...]]]] = {}
    for m, spec in table["methods"].items():
        by_family.setdefault(str(spec.get("family", m)), set()).add((measured[m].group, measured[m].reads))
    out = {}
    for method in methods:
        if method in measured:
            out[method] = measured[method]
            continue
        family = family_of(method)
        alike = by_family.get(family or "", set())
        if family and len(alike) == 1:
            (group, reads), = alike
            out[method] = Use(group, reads, family)
        else:
            out[method] = Use(UNMEASURED)
    return out


def family_lookup(params: Params | None) -> Callable[[str], str | None]:
    """A method's family from the params' registry (`method_config`), None for a name it lacks."""
    def family(method: str) -> str | None:
        try:
            return params.method_config(method)[0] if params is not None else None
        except Exception:  # noqa: BLE001 - a name the params do not define: no family
            return None
    return family


# ------------------------------------------------------------------------------ the claims' test

@dataclass(frozen=True)
class Separation:
    """A method against `against` (its group's best, or the ceiling): method − against and its
    95% interval by the claims' test, or why the pair is untested (`reason`)."""

    against: str
    difference: float | None = None
    low: float | None = None
    high: float | None = None
    test: str = ""
    reason: str = ""
    need: int = 0  # the claims' minimum seeds per arm for `test`

    @property
    def tested(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def separated(self) -> bool:
        """The interval excludes 0: the claims' test tells the two apart."""
        return self.tested and (self.low > 0 or self.high < 0)  # type: ignore[operator]

    @property
    def tied(self) -> bool:
        """Tested and not separated."""
        return self.tested and not self.separated


def _values(runs: Mapping[int | None, RunData], metric: str) -> dict[int, RunData]:
    return {s: r for s, r in sorted(runs.items(), key=lambda kv: -1 if kv[0] is None else kv[0])
            if s is not None and number((r.metrics or {}).get(metric)) is not None}


def _scores(method: str, runs: Mapping[int, RunData], metric: str,
            notes: list[str]) -> dict[int, dict[str, float]] | None:
    """Per seed, the per-item scores of `metric`; None when any run lacks them."""
    out = {}
    for seed, run in runs.items():
        where = f"data/eval/{method}/seed{seed}/items.json"
        try:
            scores = item_scores(run.items, metric, where) if run.items is not None else None
        except DataError as e:
            if (note := f"{e}; the report's test of {method} uses its per-seed values") not in notes:
                notes.append(note)
            scores = None
        if not scores:
            return None
        out[seed] = scores
    return out


def separate(method: str, runs: Mapping[int | None, RunData], against: str,
             against_runs: Mapping[int | None, RunData], metric: str,
             notes: list[str] | None = None) -> Separation:
    """`method` − `against` on `metric` by the claims' test (module docstring): per item when
    every run of both has per-item scores and they share items, else per run; untested below the
    claims' minimum seeds per arm."""
    notes = notes if notes is not None else []
    a, b = _values(runs, metric), _values(against_runs, metric)
    sa, sb = _scores(method, a, metric, notes), _scores(against, b, metric, notes)
    common = (sorted(set.intersection(*(set(s) for s in (*sa.values(), *sb.values()))))
              if sa and sb else [])
    per_item = bool(common)
    need = MIN_SEEDS if per_item else MIN_SEEDS_PER_RUN
    test = TEST_ITEMS if per_item else WELCH
    if min(len(a), len(b)) < need:
        have = ", ".join(f"{m} {len(x)}" for m, x in ((method, a), (against, b)))
        return Separation(against, test=test, need=need,
                          reason=f"untested: the claims' {test} needs {need} seeds per arm ({have})")
    if per_item and sa and sb:
        t = np.array([[sa[s][i] for i in common] for s in a])
        c = np.array([[sb[s][i] for i in common] for s in b])
        e = seed_item_t(t, c)
    else:
        e = t_estimate([number((r.metrics or {}).get(metric)) for r in a.values()],
                       [number((r.metrics or {}).get(metric)) for r in b.values()])
    return Separation(against, e.difference, e.low, e.high, test, need=need)


# ------------------------------------------------------------------------------ collapse

@dataclass(frozen=True)
class Collapse:
    """A method's runs under the lab's collapse label and the detector's alarms on them."""

    labelled: int
    collapsed: tuple[int, ...]          # seeds the label calls collapsed
    alarms: tuple[tuple[int, int], ...]  # (seed, step) where the lab detector fires

    def cell(self) -> str:
        return f"{len(self.collapsed)} of {self.labelled}" if self.labelled else "—"

    def alarm_cell(self) -> str:
        return f"{len(self.alarms)} of {self.labelled}" if self.labelled else "—"


def collapse_by_method(record: Mapping | None) -> dict[str, Collapse]:
    """Per method, from the alarms record's `independent` runs (flows/alarms.py)."""
    runs = ((record or {}).get("independent") or {}).get("runs") or []
    acc: dict[str, list] = {}
    for r in runs:
        entry = acc.setdefault(r["method"], [0, [], []])
        entry[0] += 1
        if r["label"] == "collapsed":
            entry[1].append(r["seed"])
        if (step := r["alarms"].get("lab_detector")) is not None:
            entry[2].append((r["seed"], int(step)))
    return {m: Collapse(n, tuple(sorted(c)), tuple(sorted(a))) for m, (n, c, a) in acc.items()}


# ------------------------------------------------------------------------------ the answer

@dataclass
class Row:
    """One method (or the base) in a task's headline table."""

    method: str
    stats: dict[str, dict]                          # metric -> {"mean", "std", "n"}
    seeds: dict[str, list[tuple[int | None, float]]]  # metric -> [(seed, value)]
    events: list[tuple[int, dict]]                  # (seed, collapse event of run.json)
    base: bool = False
    use: Use = field(default_factory=lambda: Use(UNMEASURED))
    test: Separation | None = None          # against its group's best (None: it is the best, or the base)
    collapse: Collapse | None = None  # the lab's collapse label and the detector's alarms

    @property
    def group(self) -> str:
        return "base" if self.base else self.use.group


@dataclass
class TaskResult:
    """A task's answer: rows grouped by label use (GROUPS order), each group ranked by the first
    metric, the base last (the floor); each group's best, the methods tied with it, the ceiling."""

    task: str
    metrics: list[str]
    rows: list[Row]
    best: dict[str, str]            # group -> its best method (first metric)
    ties: dict[str, list[str]]      # group -> methods the claims' test cannot separate from its best
    test_n: int | None              # items in the task's test set (the evaluations' `<task>/n`)
    ceiling: str | None = None      # the best method that reads labels
    vs_ceiling: Separation | None = None  # the label-free best against the ceiling

    def trained(self) -> list[Row]:
        return [r for r in self.rows if not r.base]

    def groups(self) -> list[tuple[str, list[Row]]]:
        """(group, its rows) in GROUPS order, then the base as `base`."""
        order = [*GROUPS, "base"]
        found = sorted({r.group for r in self.rows}, key=order.index)
        return [(g, [r for r in self.rows if r.group == g]) for g in found]

    def row(self, method: str | None) -> Row | None:
        return next((r for r in self.rows if r.method == method), None)


def headline(collected: Collected, agg: dict[str, dict], data_dir: Path,
             params: Params | None = None, alarms: Mapping | None = None,
             uses: Mapping[str, Use] | None = None, label_use: Path = LABEL_USE) -> list[TaskResult]:
    """Per task some method trained on: its methods grouped by label use and ranked, each group's
    best and ties by the claims' test, the ceiling and the floor, each method's collapse label.

    `alarms` is the alarms record (flows/alarms.py `score`; scored here over `collected` when
    None); `uses` what each method reads (read from `label_use` and the params' families when None).
    """
    by_task: dict[str, list[str]] = {}
    for method in agg:
        if method != "base":
            by_task.setdefault(run_task(data_dir, method, collected, params), []).append(method)
    if uses is None:
        uses = uses_for([m for ms in by_task.values() for m in ms], params, label_use, collected.notes)
    if alarms is None:
        alarms = alarms_.score(collected, collapse_config(params))
    collapse = collapse_by_method(alarms)
    order = [t for t in TASK_HEADLINE if t in by_task] + sorted(t for t in by_task if t not in TASK_HEADLINE)
    results = []
    for task in order:
        metrics = headline_metrics(task)
        rows = []
        for method in (*by_task[task], "base"):
            stats = {m: agg.get(method, {}).get(m) for m in metrics}
            if not any(stats.values()):
                continue
            runs = collected.runs.get(method, {})
            seeds = {m: [(s, v) for s, r in runs.items()
                         if (v := number((r.metrics or {}).get(m))) is not None] for m in metrics}
            events = [(s, e) for s, r in runs.items() if s is not None for e in r.events]
            base = method == "base"
            rows.append(Row(method, {m: st for m, st in stats.items() if st}, seeds, events, base=base,
                            use=uses.get(method, Use(UNMEASURED)),
                            collapse=None if base else collapse.get(method, Collapse(0, (), ()))))
        if not any(not r.base for r in rows):
            continue
        results.append(_rank(task, metrics, rows, collected, agg))
    return results


def collapse_config(params: Params | None) -> CollapseConfig:
    """The params' `collapse` thresholds, as flows/train.py builds them (params.yaml's if None;
    the defaults without a params.yaml)."""
    source = params if params is not None else _params()
    return CollapseConfig(**source.collapse.model_dump()) if source is not None else CollapseConfig()


def _params() -> Params | None:
    from core.params import load

    try:
        return load()
    except Exception:  # noqa: BLE001 - without params.yaml: no families, the default thresholds
        return None


def uses_for(methods: Sequence[str], params: Params | None = None, path: Path = LABEL_USE,
             notes: list[str] | None = None) -> dict[str, Use]:
    """`label_uses` of `methods` from the table at `path` and the params' families (params.yaml's
    when None); an unreadable table leaves every method not measured, with a note."""
    notes = notes if notes is not None else []
    try:
        table = read_label_use(path)
    except (OSError, ValueError) as e:
        notes.append(f"{path}: unreadable ({type(e).__name__}: {e}); every method's label use is "
                     "shown as not measured")
        return {m: Use(UNMEASURED) for m in methods}
    return label_uses(methods, table, family_lookup(params if params is not None else _params()))


def _rank(task: str, metrics: list[str], rows: list[Row], collected: Collected,
          agg: dict[str, dict]) -> TaskResult:
    first = metrics[0]

    def mean(r: Row) -> float:
        return r.stats[first]["mean"] if first in r.stats else -math.inf

    order = [*GROUPS, "base"]
    rows.sort(key=lambda r: (order.index(r.group), -mean(r)))
    best: dict[str, str] = {}
    ties: dict[str, list[str]] = {}
    for group in GROUPS:
        members = [r for r in rows if r.group == group and first in r.stats]
        if not members:
            continue
        top = members[0]
        best[group] = top.method
        ties[group] = []
        for r in members[1:]:
            r.test = separate(r.method, collected.runs.get(r.method, {}), top.method,
                              collected.runs.get(top.method, {}), first, collected.notes)
            if r.test.tied:
                ties[group].append(r.method)
    ceiling = best.get(LABELS)
    vs = None
    if ceiling and (free := best.get(LABEL_FREE)):
        vs = separate(free, collected.runs.get(free, {}), ceiling, collected.runs.get(ceiling, {}), first,
                      collected.notes)
    sizes = [int(v) for s in agg.values() if (v := (s.get(f"{task}/n") or {}).get("mean"))]
    return TaskResult(task, metrics, rows, best, ties, min(sizes) if sizes else None, ceiling, vs)


# ------------------------------------------------------------------------------ the records, once

@dataclass
class Records:
    """What the report and `make results` read from the records, gathered once (`gather`)."""

    collected: Collected          # the default study's current runs: the tables, charts and figures
    every: Collected              # with the preset studies, stale runs included (the claims and the
                                  # alarms leave them out themselves, and say so)
    agg: dict[str, dict]          # `aggregate(collected)`
    alarms: dict                  # flows/alarms.py's record over `every`: the lab's collapse label
    results: list[TaskResult]     # the first screen's answer
    left_out: list[str]           # every stale run, with why
    outdated: dict[str, dict[str, int]]  # per study, runs recorded before a change to their code


def gather(data_dir: Path, params: Params | None = None, order: Sequence[str] = (),
           collapse: CollapseConfig | None = None) -> Records:
    """Read `data_dir` (and the studies beside it, and dvc.lock) once for every table of the
    report and the README: only runs of their study's current base are counted anywhere."""
    data_dir = Path(data_dir)
    found = collect(data_dir, order)
    collected = current(found)
    every = with_studies(found, data_dir)
    alarms = alarms_.score(every, collapse if collapse is not None else collapse_config(params))
    agg = aggregate(collected)
    results = headline(collected, agg, data_dir, params, alarms)
    return Records(collected, every, agg, alarms, results, current(every).left_out,
                   outdated_runs(data_dir.parent))
