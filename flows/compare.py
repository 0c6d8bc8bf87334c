"""A study's results on one screen: `python -m flows.compare [--study NAME] [--seeds] [--metric M ...]`.

What `dvc metrics show` prints as one row per run (the evaluate stages' headline files), folded
into one row per method: the test evaluation's headline metrics (`evals/registry.py`, `headline`:
the keys of each run's `headline.json`, DVC's metric file) as the mean ± sd over the method's
seeds, the sd the report's (population, `flows/report_collect.py` `aggregate`), `n` the seeds
evaluated. `--seeds` prints a metric's every seed instead (one table per metric, method × seed,
the mean ± sd at the end). `--metric` picks the metrics (names or patterns: `'arith/*'`).

The runs are the report's: read by `flows/report_collect.py` (`collect`) from the study's record
(`data/`, or `studies/<name>/data/` for a recorded study), those trained from another base than
the study's now (stale) left out and named, as in the report. No line is wider than 120 columns:
a table with more columns than fit is cut into blocks that each repeat the method column.

`--dvc-plots` prints the top-level `plots:` section of dvc.yaml that overlays every recorded seed
of every method on its task's headline held-out curve, one chart per metric (a legend entry per
run, `<method>/seed<S>/heldout.json`).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from core.params import ROOT
from flows.report_collect import (
    Collected,
    aggregate,
    collect,
    current,
    is_count_name,
    number,
    run_task,
)

WIDTH = 120
CELL = 56   # the widest a column gets (longer names are cut with "…"): two always fit in WIDTH
GAP = "  "
BLANK = "·"  # no value: the method has no evaluation with that metric


# ------------------------------------------------------------------------------ the data

def study_record(study: str, root: Path = ROOT) -> tuple[Path, list[str]]:
    """(the study's data folder, its methods in their order) for `default` or a recorded study."""
    from flows.mlflow_records import DEFAULT, studies

    (_, data, info), = studies(root, [study])
    if study == DEFAULT:
        from core.params import read_raw

        try:
            methods = read_raw(Path(root) / "params.yaml").get("methods") or []
        except (OSError, ValueError, AttributeError):
            methods = []
    else:
        methods = info.get("methods") or []
    return data, [str(m) for m in methods]


def read_study(study: str, root: Path = ROOT) -> tuple[Collected, Path]:
    """The study's current runs (stale ones in `left_out`) and its data folder; a study with
    no evaluation at all is an error naming the folder it looked in."""
    data, order = study_record(study, root)
    found = current(collect(data, order, folder="" if study == "default" else f"studies/{study}"))
    if not any(r.metrics for seeds in found.runs.values() for r in seeds.values()):
        raise FileNotFoundError(f"study {study}: no evaluation under {_show(data / 'eval')} "
                                "(its metrics.json files); run the study first")
    return found, data


def headline_keys(collected: Collected) -> list[str]:
    """The headline metrics of the study's evaluations (each run's headline.json keys), in the
    order they first appear (the base first)."""
    from evals.registry import headline

    keys: dict[str, None] = {}
    for seeds in collected.runs.values():
        for run in seeds.values():
            keys.update(dict.fromkeys(headline(run.metrics or {})))
    return list(keys)


def all_keys(collected: Collected) -> list[str]:
    return sorted({k for seeds in collected.runs.values() for r in seeds.values()
                   for k, v in (r.metrics or {}).items() if number(v) is not None})


def pick_metrics(collected: Collected, wanted: Sequence[str]) -> list[str]:
    """`wanted` (names or fnmatch patterns) among the study's metrics, else its headline ones."""
    if not wanted:
        return headline_keys(collected)
    known = all_keys(collected)
    out: list[str] = []
    for want in wanted:
        hits = [k for k in known if fnmatch.fnmatchcase(k, want)]
        if not hits:
            shown = ", ".join(known[:15]) + (", ..." if len(known) > 15 else "")
            raise LookupError(f"no metric {want!r} in the study's evaluations (they have: {shown})")
        out += [k for k in hits if k not in out]
    return out


# ------------------------------------------------------------------------------ formatting

def decimals(values: Sequence[float], metric: str) -> int:
    """One precision for a metric's every cell: counts as integers, rates to 3 decimals, larger
    values (lengths, seconds) to 1 or none."""
    top = max((abs(v) for v in values), default=0.0)
    if is_count_name(metric) or (top >= 10 and all(float(v).is_integer() for v in values)):
        return 0
    return 3 if top < 10 else 1 if top < 1000 else 0


def fmt(value: float, places: int) -> str:
    return f"{value:.{places}f}"


def _places(collected: Collected, metric: str) -> int:
    return decimals([x for seeds in collected.runs.values() for r in seeds.values()
                     if (x := number((r.metrics or {}).get(metric))) is not None], metric)


def _stat(st: dict, places: int) -> str:
    """`mean ± sd` (the mean alone for one evaluation)."""
    return fmt(st["mean"], places) + (f" ± {fmt(st['std'], places)}" if st["n"] > 1 else "")


def _cut(text: str, width: int = CELL) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def blocks(header: Sequence[str], rows: Sequence[Sequence[str]], fixed: int = 1,
           width: int = WIDTH, right: int | None = None) -> list[str]:
    """A table as lines no wider than `width`: the first `fixed` columns, then as many others as
    fit; the rest in further blocks (a blank line between) that repeat the first columns.
    Columns from `right` on are right-aligned (numbers).

    >>> for line in blocks(["m", "a" * 10, "b" * 10, "c"], [["x", "1", "2", "3"]], width=20):
    ...     print(line)
    m  aaaaaaaaaa
    x           1
    <BLANKLINE>
    m  bbbbbbbbbb  c
    x           2  3
    """
    cells = [[_cut(c) for c in header]] + [[_cut(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    right = fixed if right is None else right

    def line(row: Sequence[str], cols: Sequence[int]) -> str:
        return GAP.join(row[i].rjust(widths[i]) if i >= right else row[i].ljust(widths[i])
                        for i in cols).rstrip()

    groups: list[list[int]] = []
    base = sum(widths[:fixed]) + len(GAP) * max(fixed - 1, 0)
    for i in range(fixed, len(header)):
        if groups and base + sum(len(GAP) + widths[j] for j in groups[-1] + [i]) <= width:
            groups[-1].append(i)
        else:
            groups.append([i])
    out: list[str] = []
    for group in groups or [[]]:
        if out:
            out.append("")
        cols = list(range(fixed)) + group
        out += [line(row, cols) for row in cells]
    return out


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, break_on_hyphens=False) or [""]


def _show(path: Path) -> str:
    path = Path(path)
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def mean_table(collected: Collected, metrics: Sequence[str]) -> list[str]:
    """method × metric: mean ± sd over the seeds; `n` the seeds evaluated (a cell's own count
    in brackets where it has fewer)."""
    agg = aggregate(collected)
    places = {m: _places(collected, m) for m in metrics}
    rows = []
    for method, seeds in collected.runs.items():
        if method not in agg:
            continue
        n = sum(r.metrics is not None for r in seeds.values())
        row = [method, str(n)]
        for m in metrics:
            st = agg[method].get(m)
            row.append(BLANK if st is None else
                       _stat(st, places[m]) + (f" ({st['n']})" if st["n"] != n else ""))
        rows.append(row)
    return blocks(["method", "n", *metrics], rows, fixed=2, right=1)


def seed_tables(collected: Collected, metrics: Sequence[str]) -> list[str]:
    """Per metric, method × seed (the seeds some method has it for), then the mean ± sd; the
    base (one evaluation) in the mean column."""
    agg = aggregate(collected)
    out: list[str] = []
    for m in metrics:
        places = _places(collected, m)
        values = {method: {s: x for s, r in runs.items()
                           if s is not None and (x := number((r.metrics or {}).get(m))) is not None}
                  for method, runs in collected.runs.items()}
        seeds = sorted({s for vals in values.values() for s in vals})
        rows = [[method, *(fmt(values[method][s], places) if s in values[method] else BLANK
                           for s in seeds), _stat(st, places)]
                for method in collected.runs if (st := agg.get(method, {}).get(m)) is not None]
        if not rows:
            continue
        out += ([""] if out else []) + [f"{m}, by seed:"]
        out += blocks(["method", *(f"s{s}" for s in seeds), "mean ± sd"], rows)
    return out


def left_out(collected: Collected) -> list[str]:
    """The stale runs, one entry per method and reason: `rlme/seed0, seed1: trained from ...`."""
    groups: dict[tuple[str, str], list[str]] = {}
    for entry in collected.left_out:
        run, _, why = entry.partition(": ")
        method, _, seed = run.rpartition("/")
        groups.setdefault((method or seed, why), []).append(seed if method else "")
    return [f"{method}/{', '.join(seeds)}: {why}" if any(seeds) else f"{method}: {why}"
            for (method, why), seeds in groups.items()]


def render(study: str, root: Path = ROOT, by_seed: bool = False, metrics: Sequence[str] = ()) -> list[str]:
    """The lines `python -m flows.compare` prints."""
    collected, data = read_study(study, root)
    chosen = pick_metrics(collected, metrics)
    what = "every seed" if by_seed else "mean ± sd over n seeds (population sd, as the report)"
    out = _wrap(f"study {study} ({_show(data)}/): the test evaluation, {what}; {BLANK}: none")
    out.append("")
    out += seed_tables(collected, chosen) if by_seed else mean_table(collected, chosen)
    if collected.left_out:
        out.append("")
        out += _wrap(f"Left out ({len(collected.left_out)} runs, another base than the study's now, as "
                     "in the report): " + "; ".join(left_out(collected)))
    return out


# ------------------------------------------------------------------------------ dvc plots

def dvc_plots(root: Path = ROOT) -> str:
    """dvc.yaml's top-level `plots:`: per task and headline metric, the held-out curve of every
    recorded seed of every method trained on that task (default study), a line per file. DVC
    drops the files' common folder from the legend, so an entry reads `<method>/seed<S>/heldout.json`
    while a chart holds two methods or more."""
    from evals.registry import headline_metrics

    data, order = study_record("default", root)
    found = current(collect(data, order))  # a stale run (another base) is left out, as in the report
    by_task: dict[str, list[tuple[str, int]]] = {}
    for method, seeds in found.runs.items():
        runs = [(method, s) for s, r in seeds.items() if s is not None and r.heldout]
        if runs:
            by_task.setdefault(run_task(data, method, found), []).extend(runs)
    lines = ["plots:"]
    for task, runs in by_task.items():
        n = len({m for m, _ in runs})
        for metric in headline_metrics(task):
            name = metric.partition("/")[2]
            lines += [f"  - heldout_{metric.replace('/', '_')}:",
                      f'      title: "held-out {task} {name}, every seed: the {n} methods trained on {task}"',
                      "      template: overlay", "      x: step", "      y:"]
            lines += [f"        data/plots/{m}/seed{s}/heldout.json: {metric}" for m, s in runs]
            lines += ["      x_label: GRPO step", f"      y_label: {name}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    from core.cli import run_main

    p = argparse.ArgumentParser(description="A study's test metrics as method × seed or mean ± sd, "
                                "120 columns wide (flows/compare.py).")
    p.add_argument("--study", action="append", default=[], metavar="NAME",
                   help="`default` (data/, the default) or a recorded study under studies/; repeatable")
    p.add_argument("--seeds", action="store_true", help="every seed: one table per metric")
    p.add_argument("--metric", nargs="+", action="extend", default=[], metavar="M",
                   help="metric names or patterns (`'arith/*'`); default: the headline metrics")
    p.add_argument("--dvc-plots", action="store_true",
                   help="print dvc.yaml's top-level plots: section (every seed) and exit")
    args = p.parse_args(argv)

    def go() -> None:
        if args.dvc_plots:
            print(dvc_plots(ROOT), end="")
            return
        out: list[str] = []
        for study in args.study or ["default"]:
            out += ([""] if out else []) + render(study, ROOT, args.seeds, args.metric)
        try:
            print("\n".join(out))
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    run_main(go)


if __name__ == "__main__":
    main(sys.argv[1:])
