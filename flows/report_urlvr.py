"""The report's table of URLVR's per-training measures (evals/urlvr.py, docs/collapse.md).

One row per trained method, read from each seed's training curve (train.json, `RunData.train`):
the reward's accuracy against the truth at the last logged step, the point-biserial correlation
of proxy reward and correctness over the run, the Model Collapse Step of each seed, and how many
seeds' reward accuracy rises and then falls. Runs recorded before the measures existed have no
such keys: they are named as not logged, never read as zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import mean
from typing import Any

from evals.urlvr import ACCURACY, CORRELATION, KEYS, collapse_step, logged, rise_then_fall, series
from flows.report_format import _fmt, _markdown, html_table

HEADER = ["method", "seeds", "final reward accuracy", "mean point-biserial",
          "Model Collapse Step per seed", "rise then fall"]
NOT_LOGGED = "not logged (recorded before the measures)"


def _mean(values: list[float]) -> str:
    return _fmt(mean(values)) if values else "—"


def urlvr_rows(runs: Mapping[str, Mapping[int | None, Any]]) -> list[list[str]]:
    """Per method with a trained seed: [method, seeds, mean final reward accuracy, mean
    point-biserial (each seed's mean over its logged steps, then over seeds), the Model Collapse
    Step per seed (`s0: 40`, `s1: none`), seeds whose reward accuracy rises then falls (`k of n`)].
    A method none of whose seeds logged the measures gets :data:`NOT_LOGGED` in each measure's
    cell; a seed that did not is named in the collapse cell. "—" where a measure was logged but
    never defined (e.g. every group's reward constant). Stale runs (`RunData.stale`) are left out,
    as from every table of the report.

    >>> from types import SimpleNamespace as Run
    >>> new = [{"step": 1, ACCURACY: 0.6, CORRELATION: 0.2}, {"step": 2, ACCURACY: 0.8},
    ...        {"step": 3, ACCURACY: 0.4, CORRELATION: 0.4}]
    >>> urlvr_rows({"m": {0: Run(train=new), 1: Run(train=[{"step": 1, "reward": 0.5}])},
    ...             "old": {0: Run(train=[{"step": 1, "reward": 0.5}])}})[0]
    ['m', '2', '0.400', '0.300', 's0: 3; s1: not logged', '1 of 1']
    """
    rows = []
    for method, seeds in runs.items():
        trained = {s: run for s, run in sorted(seeds.items(), key=lambda x: (x[0] is None, x[0]))
                   if s is not None and getattr(run, "train", None) and not getattr(run, "stale", "")}
        if not trained:
            continue
        measured = {s: run.train for s, run in trained.items() if any(logged(run.train, k) for k in KEYS)}
        if not measured:
            rows.append([method, str(len(trained)), NOT_LOGGED, NOT_LOGGED, NOT_LOGGED, NOT_LOGGED])
            continue
        finals = [points[-1][1] for points in (series(c, ACCURACY) for c in measured.values()) if points]
        correlations = [mean(v for _, v in points)
                        for points in (series(c, CORRELATION) for c in measured.values()) if points]
        steps = []
        for s in trained:
            if s not in measured:
                steps.append(f"s{s}: not logged")
                continue
            found = collapse_step(measured[s])
            steps.append(f"s{s}: {'none' if found is None else found}")
        falls = sum(rise_then_fall([v for _, v in series(c, ACCURACY)]) for c in measured.values())
        rows.append([method, str(len(trained)), _mean(finals), _mean(correlations), "; ".join(steps),
                     f"{falls} of {len(measured)}"])
    return rows


def urlvr_markdown(runs: Mapping[str, Mapping[int | None, Any]]) -> str:
    """The table for summary.md, or one line when no run was trained."""
    rows = urlvr_rows(runs)
    return _markdown(HEADER, rows) if rows else "No training curves found."


def urlvr_html(runs: Mapping[str, Mapping[int | None, Any]]) -> str:
    """The table for index.html, or one line when no run was trained."""
    rows = urlvr_rows(runs)
    return html_table(HEADER, rows, css="text") if rows else "<p>No training curves found.</p>"
