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

HEADER = ["method", "seeds measured", "final reward accuracy", "mean point-biserial",
          "Model Collapse Step per seed", "rise then fall"]
NOT_LOGGED = "recorded before the measures"


def _mean(values: list[float]) -> str:
    return _fmt(mean(values)) if values else "—"


def _trained(seeds: Mapping[int | None, Any]) -> dict:
    return {s: run for s, run in sorted(seeds.items(), key=lambda x: (x[0] is None, x[0]))
            if s is not None and getattr(run, "train", None) and not getattr(run, "stale", "")}


def urlvr_rows(runs: Mapping[str, Mapping[int | None, Any]]) -> tuple[list[list[str]], list[str]]:
    """(rows, methods not measured). A row per method with a seed that logged the measures:
    [method, seeds measured of those trained (`1 of 10`), mean final reward accuracy, mean
    point-biserial (each seed's mean over its logged steps, then over seeds), the Model Collapse
    Step of each measured seed (`s0: 40`, `s1: none`), measured seeds whose reward accuracy rises
    then falls (`k of n`)]. The methods whose every seed was recorded before the measures existed
    are listed apart (never read as zeros). "—" where a measure was logged but never defined
    (e.g. every group's reward constant). Stale runs (`RunData.stale`) are left out, as from every
    table of the report.

    >>> from types import SimpleNamespace as Run
    >>> new = [{"step": 1, ACCURACY: 0.6, CORRELATION: 0.2}, {"step": 2, ACCURACY: 0.8},
    ...        {"step": 3, ACCURACY: 0.4, CORRELATION: 0.4}]
    >>> urlvr_rows({"m": {0: Run(train=new), 1: Run(train=[{"step": 1, "reward": 0.5}])},
    ...             "old": {0: Run(train=[{"step": 1, "reward": 0.5}])}})
    ([['m', '1 of 2', '0.400', '0.300', 's0: 3', '1 of 1']], ['old'])
    """
    rows, unmeasured = [], []
    for method, seeds in runs.items():
        trained = _trained(seeds)
        if not trained:
            continue
        measured = {s: run.train for s, run in trained.items() if any(logged(run.train, k) for k in KEYS)}
        if not measured:
            unmeasured.append(method)
            continue
        finals = [points[-1][1] for points in (series(c, ACCURACY) for c in measured.values()) if points]
        correlations = [mean(v for _, v in points)
                        for points in (series(c, CORRELATION) for c in measured.values()) if points]
        steps = [f"s{s}: {'none' if (found := collapse_step(c)) is None else found}" for s, c in measured.items()]
        falls = sum(rise_then_fall([v for _, v in series(c, ACCURACY)]) for c in measured.values())
        rows.append([method, f"{len(measured)} of {len(trained)}", _mean(finals), _mean(correlations),
                     "; ".join(steps), f"{falls} of {len(measured)}"])
    return rows, unmeasured


def _apart(unmeasured: list[str]) -> str:
    return (f"Not measured, every run {NOT_LOGGED} (training it again logs them): "
            + ", ".join(unmeasured) + ".") if unmeasured else ""


def urlvr_markdown(runs: Mapping[str, Mapping[int | None, Any]]) -> str:
    """The table for summary.md, then the methods not measured; one line when none is."""
    rows, unmeasured = urlvr_rows(runs)
    parts = [_markdown(HEADER, rows)] if rows else (["No run logged the measures yet."] if unmeasured
                                                     else ["No training curves found."])
    return "\n\n".join(parts + ([_apart(unmeasured)] if unmeasured else []))


def urlvr_html(runs: Mapping[str, Mapping[int | None, Any]]) -> str:
    """The table for index.html, then the methods not measured; one line when none is."""
    from html import escape

    rows, unmeasured = urlvr_rows(runs)
    out = html_table(HEADER, rows, css="text") if rows else (
        "<p>No run logged the measures yet.</p>" if unmeasured else "<p>No training curves found.</p>")
    return out + (f"<p>{escape(_apart(unmeasured))}</p>" if unmeasured else "")
