"""Reading a claim's runs: the number each run gives a comparison (`run_value`: its test metric,
or a per-run measure from its curves), the runs of the current base (`_seeded`: stale runs left out,
with a note), their per-item scores (`_items`), and the base they stand on (`_base_of`). What
evals/claims.py compares.

And the claim's premise (evals/claims.yaml `premise`, a name of `evals.premises.PREMISES`), read on
the base its arms start from: the base's evaluation carries the premises stage's record
(`premises`, data/eval/base/premises.json). `premise_check` says whether it holds there, with the
measured value against its threshold: a failed premise is a failed precondition of the claim on
that base (`not tested`), one not measured (no record, or a malformed one: noted) decides nothing.
`premise_json` is what the report shows per base, `premise_headline` the headline's reason where
it fails on both bases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from core.io import DataError
from core.paths import run_key
from evals.claims_rule import Checked, Verdict, _round
from evals.claims_spec import (
    FAILS,
    HOLDS,
    NOT_MEASURED,
    NOT_TESTED,
    Claim,
    RunFiles,
    Runs,
    finite,
    is_base,
    study_of,
)
from evals.items import item_scores
from evals.premises import PREMISES, VERSION, holds


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


# ------------------------------------------------------------------------------ the base's premise

# How a premise's measure reads in a reason (the others by their key without `premise/`).
_MEASURE_WORDS = {"premise/self_certainty_auroc": "self-certainty AUROC",
                  "premise/token_entropy": "token entropy"}


def premise_measure(name: str) -> str:
    """What premise `name` measures, in words.

    >>> premise_measure("confidence_tracks_correctness"), premise_measure("latent_skill")
    ('self-certainty AUROC', 'pass@16 − pass@1')
    """
    p = PREMISES[name]
    words = [_MEASURE_WORDS.get(m, m.removeprefix("premise/")) for m in (p.measure, p.minus) if m]
    return " − ".join(words)


def premise_text(name: str, status: str, value: float | None) -> str:
    """The measured value against the threshold, or `not measured`.

    >>> premise_text("confidence_tracks_correctness", "fails", 0.5432)
    'self-certainty AUROC 0.543 < 0.70'
    >>> premise_text("room_to_sharpen", "holds", 0.81), premise_text("room_to_sharpen", "not measured", None)
    ('token entropy 0.810 ≥ 0.30', 'not measured')
    """
    if status not in (HOLDS, FAILS) or value is None:
        return NOT_MEASURED
    return (f"{premise_measure(name)} {value:.3f} {'≥' if status == HOLDS else '<'} "
            f"{PREMISES[name].threshold:.2f}")


def premise_bases(claim: Claim) -> list[str]:
    """The bases a claim's premise is read on: the base of each study whose arms it compares
    (`base`, `<study>/base`, a second base's `default.seed1/base`)."""
    return list(dict.fromkeys(f"{s}/base" if (s := study_of(a)) else "base" for a in claim.arms))


def _premises_file(base: str) -> str:
    study = study_of(base)
    return f"{f'studies/{study}/' if study else ''}data/eval/base/premises.json"


def _premise_on(runs: Runs, base: str, name: str, notes: list[str]) -> tuple[str, float | None]:
    """(status, value) of premise `name` on `base` from its evaluation's premises record:
    read from the record's measures (`evals.premises.holds`, today's thresholds); its recorded
    `holds/<name>` must be a boolean or null and is checked against them. No record, or one
    that cannot be read (noted): not measured."""
    run = (runs.get(base) or {}).get(None)
    record = None if run is None else getattr(run, "premises", None)
    where = _premises_file(base)
    if record is None and run is not None:
        # A study that trains on the committed base (tasks/studies.py `base_chain`: its preset
        # leaves the base's inputs alone) reads the premises measured on that very base: the
        # same weights by md5 (evals/lineage.py), whichever study's record holds them.
        same = str(getattr(run, "base", "") or "")
        twin = next((arm for arm, seeds in runs.items() if arm != base and is_base(arm)
                     and same.startswith("md5:") and (r := seeds.get(None)) is not None
                     and getattr(r, "base", "") == same and getattr(r, "premises", None) is not None),
                    None)
        if twin is not None:
            record, where = runs[twin][None].premises, _premises_file(twin)
    if record is None:
        return NOT_MEASURED, None

    def unread(why: str) -> tuple[str, float | None]:
        note = f"{where}: {why}; premise {name} taken as not measured"
        if note not in notes:
            notes.append(note)
        return NOT_MEASURED, None

    if not isinstance(record, Mapping):
        return unread(f"expected a JSON object, got {type(record).__name__}")
    if record.get("version") is not None and str(record["version"]) != VERSION:
        return unread(f"measured by version {record['version']} of evals/premises.py, the code is {VERSION}")
    flag = record.get(f"holds/{name}")
    if flag is not None and not isinstance(flag, bool):
        return unread(f"holds/{name} is {flag!r}, not true, false or null")
    p = PREMISES[name]
    bad = [m for m in (p.measure, p.minus) if m and record.get(m) is not None and finite(record[m]) is None]
    if bad:
        return unread(f"{bad[0]} is {record[bad[0]]!r}, not a finite number")
    ok, value = holds(dict(record), name)
    if ok is None:
        if isinstance(flag, bool):
            return unread(f"holds/{name} is {str(flag).lower()} but {p.measure} is missing or null")
        return NOT_MEASURED, None
    if isinstance(flag, bool) and flag != ok:
        note = (f"{where}: holds/{name} is {str(flag).lower()}, but {premise_measure(name)} "
                f"{value:.3f} against today's threshold {p.threshold:.2f} says otherwise; the "
                "measure is read")
        if note not in notes:
            notes.append(note)
    return (HOLDS if ok else FAILS), value


def premise_check(runs: Runs, claim: Claim, notes: list[str]) -> tuple[Checked | None, dict]:
    """The claim's premise on the base(s) it is decided on: a precondition (`Checked`, `what` =
    `premise <name>`) where measured, None where not (it then decides nothing), and the record the
    report shows ({} for a claim without a premise). Over several studies' bases: it fails if it
    fails on any, holds if it holds on all."""
    if not claim.premise:
        return None, {}
    found = [(b, *_premise_on(runs, b, claim.premise, notes)) for b in premise_bases(claim)]
    chosen = (next((x for x in found if x[1] == FAILS), None)
              or next((x for x in found if x[1] == NOT_MEASURED), found[0]))
    base, status, value = chosen
    text = premise_text(claim.premise, status, value)
    record = {"name": claim.premise, "base": base, "status": status, "value": _round(value),
              "threshold": PREMISES[claim.premise].threshold, "text": text}
    if status == NOT_MEASURED:
        return None, record
    return Checked(f"premise {claim.premise}", status, text, value=value), record


def premise_reason(claim: Claim, premise: Checked, checked: Sequence[Checked]) -> str:
    """A claim's reason where its premise fails on the base: the premise and its measured value,
    then any other failed precondition."""
    others = [p.what for p in checked if p.status == FAILS and p is not premise]
    return (f"premise {claim.premise} fails on this base: {premise.detail}"
            + (f"; precondition failed: {'; '.join(others)}" if others else ""))


def premise_json(v: Verdict) -> dict | None:
    """The claim's premise as the report shows it: its name, what it measures, the threshold, and
    per base its status (holds, fails, not measured), value and words; None without a premise."""
    name = v.claim.premise
    if not name:
        return None
    p = PREMISES[name]
    mine = next((c for c in v.preconditions if c.what == f"premise {name}"), None)
    first = ({"status": mine.status, "value": _round(mine.value), "text": mine.detail} if mine
             else {"status": NOT_MEASURED, "value": None, "text": NOT_MEASURED})
    theirs = (v.second or {}).get("premise") or {}
    second = {k: theirs.get(k, NOT_MEASURED if k != "value" else None) for k in ("status", "value", "text")}
    return {"name": name, "measure": premise_measure(name), "threshold": p.threshold, "why": p.why,
            "bases": premise_bases(v.claim), "first_base": first, "second_base": second}


def premise_headline(v: Verdict) -> Verdict:
    """The headline's reason where the premise fails on both bases (the family rule across bases
    then gives `not tested`): the premise and both measured values."""
    record = premise_json(v)
    if record is None or v.verdict != NOT_TESTED or not all(
            record[b]["status"] == FAILS for b in ("first_base", "second_base")):
        return v
    own = v.first or {"verdict": v.verdict, "reason": v.reason}
    return replace(v, first=own, reason=(
        f"premise {record['name']} fails on both bases: {record['first_base']['text']} (first), "
        f"{record['second_base']['text']} (second)"))
