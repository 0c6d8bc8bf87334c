"""A base evaluated once is one draw of a fixed model, and its draw's noise is per-item noise
(evals/stats.py `variance_parts`): the assumption that lets a per-item test against the base,
evaluated once, carry that noise in its item part and need no seed level for the base.

Checked on the committed records: every run's test curve (data/plots/<arm>/seed<s>/test.json)
starts at step 0 with the base itself sampled with the run's seed, `eval.heldout_k` samples per
test item. Over the seeds, those step-0 values are independent draws of the same fixed model on
the same items. If a draw had a shared part beyond its items' noise (a seed-level effect of the
base), their spread would exceed what the base's per-item scores predict; it does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

from core.params import ROOT, load
from evals.items import item_scores

KEY = "arith/pass@1"


def step0_draws(data: Path) -> dict[int, float]:
    """Seed -> the base's test pass@1 at step 0 of that seed's runs. Every arm of a seed starts
    from the same draw; a seed whose arms disagree (runs of another base or sampler beside each
    other, as a working tree mid-run has them) is left out rather than guessed."""
    found: dict[int, set[float]] = {}
    for f in sorted(data.glob("plots/*/seed*/test.json")):
        rows = json.loads(f.read_text())
        first = [r for r in rows if r.get("step") == 0 and isinstance(r.get(KEY), (int, float))]
        if first:
            found.setdefault(int(f.parent.name.removeprefix("seed")), set()).add(round(float(first[0][KEY]), 9))
    return {seed: values.pop() for seed, values in found.items() if len(values) == 1}


def test_the_bases_draw_to_draw_spread_is_its_per_item_noise() -> None:
    data = ROOT / "data"
    draws = step0_draws(data)
    base_items = data / "eval" / "base" / "items.json"
    if len(draws) < 5 or not base_items.exists():
        pytest.skip("the committed records lack the base's step-0 test draws or its per-item scores")
    params = load()
    k_eval, k_curve = params.eval.k, params.eval.heldout_k
    p = np.array(list(item_scores(json.loads(base_items.read_text()), KEY, str(base_items)).values()))
    # An item's pass@1 over k samples varies with p(1 - p) / k between draws; p(1 - p) is
    # estimated without bias from one draw's k samples by p̂(1 - p̂) k / (k - 1).
    per_item = p * (1 - p) * k_eval / (k_eval - 1)
    predicted = float(per_item.sum() / (k_curve * len(p) ** 2))  # the variance of one draw's mean
    values = np.array(list(draws.values()))
    observed = float(values.var(ddof=1))
    df = len(values) - 1
    # observed · df / predicted is χ² with df degrees of freedom if the draws have no shared part.
    ratio = observed / predicted
    low, high = st.chi2.ppf([0.005, 0.995], df) / df
    print(f"\nbase, {len(values)} step-0 draws: sd {observed ** 0.5:.4f} against {predicted ** 0.5:.4f} "
          f"predicted by its per-item noise (ratio of variances {ratio:.2f}; 99% band {low:.2f}-{high:.2f})")
    assert low <= ratio <= high
