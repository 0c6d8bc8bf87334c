"""Reading a claim's runs: the number each run gives a comparison (`run_value`: its test metric,
or a per-run measure from its curves), the runs of the current base (`_seeded`: stale runs left out,
with a note), their per-item scores (`_items`), and the base they stand on (`_base_of`). What
evals/claims.py compares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from core.io import DataError
from core.paths import run_key
from evals.claims_spec import RunFiles, Runs, finite, is_base
from evals.items import item_scores


def _curve(rows: Sequence[dict], key: str) -> list[float]:
    """The finite values of `key` in step order."""
    pts = sorted((s, v) for r in rows if isinstance(r, dict)
                 and (s := finite(r.get("step"))) is not None and (v := finite(r.get(key))) is not None)
    return [v for _, v in pts]


class _Spec(NamedTuple):
    """What a comparison reads: the metric and how one run gives it."""

    metric: str
    measure: str


def run_value(run: RunFiles, claim) -> float | None:
    """The run's number for the claim (None if its files lack it).

    `test`: the metric in metrics.json. `heldout_drop`: the best value of the held-out curve minus
    its last. `train_mean`: the mean of the training curve's logged steps. `train_change`: the
    mean of the last quarter of the training curve's logged steps minus the mean of the first
    quarter (at least one step each; 2 points needed). `test_rise_fall`: on the test split
    evaluated at each checkpoint (test.json, the curve the independent collapse label reads and no
    alarm does; flows/alarms.py), how far the curve rose above its first point (the base) AND then
    fell below its peak: min(peak − first, peak − last). At least the label's DELTA (0.10) when the
    run improved and then collapsed; near 0 for a run that never improved (it only fell) and for
    one that kept its gain.
    """
    if claim.measure == "test":
        return finite((run.metrics or {}).get(claim.metric))
    source = {"heldout_drop": run.heldout, "test_rise_fall": getattr(run, "test", None) or []}
    values = _curve(source.get(claim.measure, run.train), claim.metric)
    if len(values) < 2:
        return None
    if claim.measure == "heldout_drop":
        return max(values) - values[-1]
    if claim.measure == "test_rise_fall":
        return min(max(values) - values[0], max(values) - values[-1])
    if claim.measure == "train_mean":
        return float(np.mean(values))
    q = max(1, len(values) // 4)
    return float(np.mean(values[-q:]) - np.mean(values[:q]))


def _seeded(runs: Runs, arm: str, spec, notes: list[str]) -> dict[int, RunFiles]:
    """The arm's runs of the current base (by seed; a base's evaluation at the params' seed as
    seed 0 and its draw d, params `base_draws`, as seed d) that give the comparison a number;
    stale runs are left out with a note."""
    out = {}
    for s, r in runs.get(arm, {}).items():
        if s is None and not is_base(arm):
            continue
        stale = getattr(r, "stale", "")
        if stale:
            note = f"{run_key(arm, s)}: left out, {stale}"
            if note not in notes:
                notes.append(note)
            continue
        if run_value(r, spec) is not None:
            out[0 if s is None else s] = r
    return out


def draw_key(arm: str, seed: int) -> str:
    """A run's name under data/eval/ from `_seeded`'s keys: `rlvr/seed2`; `base` for the base's
    evaluation at the params' seed (key 0), `base/draw2` for its draw 2.

    >>> draw_key("rlvr", 0), draw_key("base", 0), draw_key("ci/base", 2)
    ('rlvr/seed0', 'base', 'ci/base/draw2')
    """
    return run_key(arm, None if is_base(arm) and seed == 0 else seed)


def _items(arm_runs: dict[str, dict[int, RunFiles]], keys: Mapping[str, str], notes: list[str]
           ) -> tuple[dict[tuple[str, int], dict[str, float]], list[str]]:
    """Per-item scores (of each arm's metric, `keys`) of every run that has them, and the runs that
    do not (missing or malformed: noted once per file)."""
    found, lacking = {}, []
    for arm, seeds in arm_runs.items():
        for seed, run in seeds.items():
            name = draw_key(arm, seed)
            where = f"data/eval/{name}/items.json"
            try:
                scores = None if run.items is None else item_scores(run.items, keys[arm], where)
            except DataError as e:
                if str(e) not in notes:
                    notes.append(f"{e}; skipped, its comparisons use seeds only")
                scores = None
            if scores:
                found[(arm, seed)] = scores
            else:
                lacking.append(name)
    return found, lacking


def _base_of(arm_runs: Mapping[str, Mapping[int, RunFiles]]) -> tuple[str, list[str]]:
    """The one base every run stands on (`""` when unrecorded), or the list of bases found."""
    bases = sorted({getattr(r, "base", "") or "" for runs in arm_runs.values() for r in runs.values()})
    return (bases[0] if len(bases) == 1 else ""), bases
