"""Per-item test scores: `data/eval/<run>/items.json`, beside the run's metrics.json.

metrics.json pools every benchmark over its rows; items.json keeps each row's numbers, so that two
runs can be compared item by item (`evals.claims` pairs them by row id). The evaluate stage writes
it from the scorer's per-row dicts (`evals.suite.evaluate_policy(..., items=...)`); it is in git,
not a DVC metric. One entry per benchmark evaluated:

    {"arith": {"headline": "pass@1",
               "ids": ["arith-test-00000", ...],
               "metrics": {"pass@1": [0.75, ...], "pass@k": [1.0, ...], ...}}, ...}

- `ids`: the rows' `id` field; a row without one is `row-<index>` (its position in the test set);
- `metrics`: one list per per-row metric, aligned with `ids`. A row's pass@1 is the mean
  correctness of its k samples, so the mean of a list is the pooled metric of metrics.json
  (values rounded to 6 decimals). `null` marks a row the metric does not apply to. Metrics pooled
  as a `Ratio` (IFEval's instruction level, MATH's per-level accuracy) are left out: their
  per-row means do not average to the pooled number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from core.io import DataError
from evals.metrics import Ratio


def item_record(rows: Sequence[dict], per_row: Sequence[dict], headline: str,
                keep_greedy: bool = True) -> dict:
    """One benchmark's entry of items.json from its rows and the scorer's per-row dicts.

    Keys starting with `greedy` are dropped when no greedy completion was generated, as
    `evals.metrics.aggregate` drops them.

    >>> item_record([{"id": "a"}, {}], [{"pass@1": 0.5, "r": Ratio(1, 2)}, {"pass@1": None}], "pass@1")
    {'headline': 'pass@1', 'ids': ['a', 'row-00001'], 'metrics': {'pass@1': [0.5, None]}}
    """
    keys = dict.fromkeys(k for d in per_row for k in d  # first-seen order, as `aggregate` pools
                         if keep_greedy or not k.startswith("greedy"))
    metrics = {}
    for key in keys:
        values = [d.get(key) for d in per_row]
        if any(isinstance(v, Ratio) for v in values):
            continue
        metrics[key] = [None if v is None else round(float(v), 6) for v in values]
    ids = [str(r.get("id", f"row-{i:05d}")) for i, r in enumerate(rows)]
    return {"headline": headline, "ids": ids, "metrics": metrics}


def item_scores(items: object, key: str, where: str) -> dict[str, float] | None:
    """Row id -> value of `key` (`<benchmark>/<metric>`) in a parsed items.json.

    None if the file has no entry for the benchmark or no such metric (the run predates the
    metric, or did not evaluate the benchmark); rows where the metric is null are left out. A
    malformed entry raises `DataError` with one line naming `where` (the file) and the fault.
    """
    bench, _, metric = key.partition("/")
    if not isinstance(items, dict):
        raise DataError(f"{where}: expected a JSON object of benchmarks, got {type(items).__name__}")
    entry = items.get(bench)
    if entry is None:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("metrics"), dict):
        raise DataError(f"{where}: {bench}: expected {{'ids': [...], 'metrics': {{...}}}}")
    ids, values = entry.get("ids"), entry["metrics"].get(metric)
    if values is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise DataError(f"{where}: {bench}: `ids` must be a list of strings")
    if len(set(ids)) != len(ids):
        raise DataError(f"{where}: {bench}: duplicate row ids")
    if not isinstance(values, list) or len(values) != len(ids):
        raise DataError(f"{where}: {bench}/{metric}: expected a list of {len(ids)} values "
                        f"(one per id), got {len(values) if isinstance(values, list) else type(values).__name__}")
    out = {}
    for i, v in zip(ids, values):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise DataError(f"{where}: {bench}/{metric}: row {i!r} has {v!r}, not a finite number")
        out[i] = float(v)
    return out
