"""How often the collapse alarms are right: every training run labelled in hindsight, three
online alarms scored against the labels (the report's "Collapse alarms" section,
reports/alarms.json).

The rules below were fixed before any run's result was looked at and are not tuned on them: this
is a measurement, not a fit.

**The label (hindsight).** The tiny world has no test curve, only a final test score, so the label
reads the run's whole **held-out (val) curve** of its task's headline metric
(`flows.report_collect.headline_metrics(task)[0]`, higher is better), step 0 (the base, before
training) included. With ``DELTA`` = 0.10 (absolute), a run is **collapsed** iff its last two
evaluations are both ``<= max(curve) - DELTA`` (it fell and stayed down); its **onset** is the
first evaluation after the maximum from which every later evaluation is ``<= max - DELTA``.
Otherwise it is **healthy**. A run with no held-out curve, no headline metric in it, or fewer
than ``MIN_EVALS`` = 3 evaluations of it is a counted skip with a note.

**The alarms** (each gives the step it fires at, or none):

1. ``lab_detector``: the lab's own detectors (models/collapse.py) run offline with the params'
   ``CollapseConfig``: reward hacking on the held-out headline curve with the train reward of the
   held-out rows (`train/reward`, fed to a ``CollapseMonitor`` exactly as the trainer callback
   does, so step 0's missing reward takes the first window's); entropy and length collapse
   (``detect_entropy_collapse``, ``detect_length_collapse``) on the train curve (train.json,
   one row per logged step, so ``patience`` counts logged rows there). The alarm is the first
   event's step, any kind.
2. ``entropy_length_trend`` (label-free): the reference is the mean of the first ``TREND_REF_ROWS``
   = 3 logged train rows' entropy (and, separately, completion_length); from the next row on, the
   alarm fires at the second of ``TREND_PATIENCE`` = 2 consecutive logged rows where entropy
   < ``TREND_FRAC`` = 0.5 x its reference or completion_length < 0.5 x its reference. A signal
   missing from any of the first 3 rows has no reference and cannot fire; with neither
   reference (or no row after them) the run is not scored by this alarm.
3. ``reward_up_probe_down``: at held-out evaluation t (steps s_0 < s_1 < ...), the mean train
   reward over the train rows logged in (s_{t-1}, s_t] is higher than over those in
   (s_{t-2}, s_{t-1}] (the window before; at t = 1 it is empty, since step 0 is the base, so
   the first chance is t = 2), while the held-out headline fell by at least ``PROBE_DROP`` =
   DELTA / 2 from evaluation t-1 to t; patience 1 (the alarm is s_t). The held-out set is the
   lab's small gold-labelled probe: the task's val split, ``world.<task>.n_val`` prompts x
   ``eval.heldout_k`` samples (100 x 2 by default). A run without train rewards is not scored.

Comparisons that are "at most"/"at least" allow ``EPS`` = 1e-9 of float slack (as
models/collapse.py does), so that 0.6 - 0.1 counts as 0.5. Per alarm, over the runs it scores:
hits (an alarm, at any step, on a collapsed run), **false alarms** (an alarm on a healthy run;
count and rate over healthy runs), **misses** (a collapsed run without an alarm; count and rate
over collapsed runs), and the **delay** of each hit in steps (alarm step - onset step; negative:
warned before the onset) with its median. A rate or median with nothing to divide by is None
(rendered "—"), never 0.

Only runs of their study's current base are labelled and scored: a stale run (trained from
another base, or evaluated from another training: evals/lineage.py, `RunData.stale`) is left out
and listed with why (`left_out` in the record), as every table and claim of the report leaves it
out.

Caveat, also on the page: the label above and alarms 1 and 3 read the same held-out curve, so
their agreement is partly by construction (the label is the lab detector's own held-out rule);
alarm 2 reads only the train curve.

**The independent label** (`independent` in the record; the report's first alarms table): the
lab's collapse label, the one the report's first screen and the README count per method (seeds
collapsed of seeds labelled, `label_counts`) beside the lab detector's alarms. It
reads the TEST split, which no alarm reads (they read the val curve and the train curve), with
its rule fixed before any run was scored against it:

- with a test curve (`data/plots/<run>/test.json`: the test split evaluated at each checkpoint,
  recorded beside the held-out curve and read by nothing else) of at least ``MIN_EVALS``
  evaluations, starting at step 0 (a curve without its start, left by a run resumed before the
  curve was saved with its checkpoints, is left out by `flows/report_collect.py` with a note):
  the rule above (`label_run`) on that curve, and its **course**: *improved, then
  collapsed* when the curve's maximum is at least ``DELTA`` above its first evaluation (the base),
  else *never improved*;
- otherwise, from the two test evaluations every committed run has, the study's base
  (`data/eval/base/metrics.json`, step 0) and the run's final one (`metrics.json`): **collapsed**
  iff final <= base - ``DELTA``, its course *fell below the base* (whether it improved first is
  not visible, and a run that rose and fell back to above the base reads healthy), its onset
  unknown (no delay).

Each alarm's false alarms, misses and delays are scored against it exactly as above; the source
of every run's label is recorded (`test curve` or `test endpoints`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from flows.report_collect import TASK_HEADLINE, Collected, headline_metrics, number
from models.collapse import (
    CollapseConfig,
    CollapseMonitor,
    detect_entropy_collapse,
    detect_length_collapse,
)

DELTA = 0.10
EPS = 1e-9
MIN_EVALS = 3
TREND_REF_ROWS = 3
TREND_FRAC = 0.5
TREND_PATIENCE = 2
TREND_SIGNALS = ("entropy", "completion_length")
PROBE_DROP = DELTA / 2
PROBE_PATIENCE = 1

COLLAPSED, HEALTHY = "collapsed", "healthy"
ALARMS = ("lab_detector", "entropy_length_trend", "reward_up_probe_down")
TITLES = {"lab_detector": "lab detector (models/collapse.py)",
          "entropy_length_trend": "entropy/length trend",
          "reward_up_probe_down": "reward up, probe down"}
RULES = {
    "label": (f"Hindsight, from the run's whole held-out (val) curve of its task's headline metric "
              f"(step 0, the base, included; there is no test curve): collapsed iff its last two "
              f"evaluations are both <= max - {DELTA:g}; onset = the first evaluation after the "
              f"maximum from which every later one is <= max - {DELTA:g}; otherwise healthy. Fewer "
              f"than {MIN_EVALS} evaluations: skipped."),
    "lab_detector": ("The lab's detectors (models/collapse.py) offline with the params' collapse "
                     "config: reward hacking on the held-out headline curve with the held-out rows' "
                     "train/reward (a CollapseMonitor); entropy and length collapse on the train "
                     "curve (patience in logged rows). Alarm = the first event's step, any kind."),
    "entropy_length_trend": (f"Label-free: reference = mean of the first {TREND_REF_ROWS} logged "
                             f"train rows' entropy (and completion_length); alarm at the second of "
                             f"{TREND_PATIENCE} consecutive later rows with entropy or "
                             f"completion_length < {TREND_FRAC:g} x its reference."),
    "reward_up_probe_down": (f"At held-out evaluation t: mean train reward over the rows logged since "
                             f"evaluation t-1 above its mean over the window before (so t >= 2), "
                             f"while the held-out headline fell by >= {PROBE_DROP:g} from t-1 to t; "
                             f"patience {PROBE_PATIENCE}. The held-out set is the small gold-labelled "
                             f"probe (world.<task>.n_val prompts x eval.heldout_k samples; 100 x 2 "
                             f"by default)."),
    "scoring": ("Hit: an alarm at any step on a collapsed run; false alarm: an alarm on a healthy run "
                "(rate over healthy runs); miss: a collapsed run without an alarm (rate over collapsed "
                "runs); delay = alarm step - onset step (negative: before the onset). A rate with "
                "nothing to divide by is None (—)."),
    "caveat": ("The label and the lab detector's reward-hacking half and 'reward up, probe down' read "
               "the same held-out curve, so their agreement is partly by construction (the label is "
               "the lab detector's own held-out rule); the entropy/length trend reads only the train "
               "curve. The independent label below reads the test split instead."),
    "independent": (f"From the TEST split, which no alarm reads; rule fixed before scoring. With a "
                    f"test curve (the test split at each checkpoint, data/plots/<run>/test.json) of "
                    f">= {MIN_EVALS} evaluations: collapsed iff its last two evaluations are <= max - "
                    f"{DELTA:g} (onset as above); course 'improved, then collapsed' when its max is >= "
                    f"its first (the base) + {DELTA:g}, else 'never improved'. Otherwise from the "
                    f"base's test evaluation and the run's final one: collapsed iff final <= base - "
                    f"{DELTA:g}, course 'fell below the base' (whether it improved first is not "
                    f"visible), onset unknown."),
}

Curve = list[tuple[int, float]]


# ------------------------------------------------------------------------------ series

def _by_step(rows: Sequence[Mapping]) -> list[tuple[int, Mapping]]:
    """Rows with a numeric step, sorted by step; a repeated step keeps its last row."""
    out: dict[int, Mapping] = {}
    for row in rows:
        step = number(row.get("step"))
        if step is not None:
            out[int(step)] = row
    return sorted(out.items())


def headline_key(heldout: Sequence[Mapping]) -> str | None:
    """The headline metric (`headline_metrics(task)[0]`) of the task the held-out rows measure:
    a TASK_HEADLINE task first, else any other with that metric (`arith_ref/pass@1`).

    >>> headline_key([{"step": 0, "facts/coverage": 0.3, "train/reward": None}])
    'facts/coverage'
    >>> headline_key([{"step": 0, "arith_ref/pass@1": 0.6, "arith_ref/boxed_rate": 0.9}])
    'arith_ref/pass@1'
    >>> headline_key([{"step": 0, "train/reward": 0.1}]) is None
    True
    """
    values = {k for row in heldout for k, v in row.items() if "/" in k and number(v) is not None}
    present = {k.partition("/")[0] for k in values}
    tasks = [t for t in TASK_HEADLINE if t in present] + sorted(present - TASK_HEADLINE.keys())
    return next((key for key in (headline_metrics(t)[0] for t in tasks) if key in values), None)


def heldout_curve(heldout: Sequence[Mapping], key: str) -> Curve:
    """(step, value) of `key` in the held-out rows, by step, missing values left out."""
    return [(s, v) for s, row in _by_step(heldout) if (v := number(row.get(key))) is not None]


# ------------------------------------------------------------------------------ the label

@dataclass(frozen=True)
class Label:
    """A run's hindsight label: collapsed or healthy, the onset step if collapsed, its peak."""

    label: str
    onset: int | None
    peak_step: int
    peak: float


def label_run(curve: Curve) -> Label:
    """Collapsed iff the last two evaluations are both <= max - DELTA; onset as in the docstring.

    >>> label_run([(0, 0.3), (25, 0.6), (50, 0.55), (75, 0.45), (100, 0.4)])
    Label(label='collapsed', onset=75, peak_step=25, peak=0.6)
    >>> label_run([(0, 0.3), (25, 0.6), (50, 0.45), (75, 0.6)]).label
    'healthy'
    """
    if len(curve) < MIN_EVALS:
        raise ValueError(f"a label needs at least {MIN_EVALS} evaluations, got {len(curve)}")
    values = [v for _, v in curve]
    top = max(values)
    i = values.index(top)  # the first evaluation at the maximum
    low = [v <= top - DELTA + EPS for v in values]
    start = len(values)
    while start > 0 and low[start - 1]:
        start -= 1  # the trailing run of evaluations at or below max - DELTA
    if len(values) - start >= 2:
        return Label(COLLAPSED, curve[start][0], curve[i][0], top)
    return Label(HEALTHY, None, curve[i][0], top)


# ------------------------------------------------------------------------------ the alarms

def lab_detector_events(heldout: Sequence[Mapping], key: str, train: Sequence[Mapping],
                        cfg: CollapseConfig) -> list[tuple[str, int]]:
    """(kind, step) of every event the lab's detectors find offline, by step."""
    monitor = CollapseMonitor(cfg)
    for step, row in _by_step(heldout):
        monitor.update(step, number(row.get("train/reward")), number(row.get(key)))
    events = [(e.kind, e.step) for e in monitor.events if e.kind == "reward_hacking"]
    rows = _by_step(train)
    if rows:
        steps = [s for s, _ in rows]

        def col(name: str) -> list[float]:
            return [math.nan if (x := number(r.get(name))) is None else x for _, r in rows]

        at = detect_entropy_collapse(steps, col("entropy"), cfg.entropy_floor, cfg.patience)
        if at is not None:
            events.append(("entropy", at))
        at = detect_length_collapse(steps, col("completion_length"), col("clipped_ratio"),
                                    cfg.min_length_frac, cfg.max_clipped, cfg.patience)
        if at is not None:
            events.append(("length", at))
    return sorted(events, key=lambda e: e[1])


def lab_detector_alarm(heldout: Sequence[Mapping], key: str, train: Sequence[Mapping],
                       cfg: CollapseConfig) -> int | None:
    """The first lab event's step, any kind, or None."""
    events = lab_detector_events(heldout, key, train, cfg)
    return events[0][1] if events else None


def trend_references(train: Sequence[Mapping]) -> dict[str, float]:
    """Per trend signal with a value in each of the first TREND_REF_ROWS rows: their mean."""
    first = [r for _, r in _by_step(train)[:TREND_REF_ROWS]]
    refs = {}
    for name in TREND_SIGNALS:
        values = [number(r.get(name)) for r in first]
        if len(values) == TREND_REF_ROWS and all(v is not None for v in values):
            refs[name] = sum(v for v in values if v is not None) / TREND_REF_ROWS
    return refs


def trend_alarm(train: Sequence[Mapping]) -> int | None:
    """Second of TREND_PATIENCE consecutive rows after the reference window with entropy or
    length below TREND_FRAC x its reference, or None.

    >>> rows = [{"step": s, "entropy": e} for s, e in [(5, 1.0), (10, 1.0), (15, 1.0), (20, 0.4),
    ...                                                  (25, 0.6), (30, 0.4), (35, 0.3)]]
    >>> trend_alarm(rows)
    35
    """
    refs = trend_references(train)
    streak = 0
    for step, row in _by_step(train)[TREND_REF_ROWS:]:
        low = any((x := number(row.get(name))) is not None and x < TREND_FRAC * ref
                  for name, ref in refs.items())
        streak = streak + 1 if low else 0
        if streak >= TREND_PATIENCE:
            return step
    return None


def _mean_reward(train: list[tuple[int, float]], lo: float, hi: float) -> float | None:
    values = [r for s, r in train if lo < s <= hi]
    return sum(values) / len(values) if values else None


def probe_alarm(curve: Curve, train: Sequence[Mapping]) -> int | None:
    """First evaluation where the train reward's window mean rose while the held-out headline
    fell by at least PROBE_DROP since the previous evaluation, or None.

    >>> curve = [(0, 0.3), (10, 0.5), (20, 0.6), (30, 0.5)]
    >>> train = [{"step": s, "reward": 0.01 * s} for s in range(5, 31, 5)]
    >>> probe_alarm(curve, train)
    30
    """
    rewards = [(s, r) for s, row in _by_step(train) if (r := number(row.get("reward"))) is not None]
    streak = 0
    for t in range(1, len(curve)):
        lo = curve[t - 2][0] if t >= 2 else -math.inf
        before = _mean_reward(rewards, lo, curve[t - 1][0])
        now = _mean_reward(rewards, curve[t - 1][0], curve[t][0])
        fell = curve[t - 1][1] - curve[t][1] >= PROBE_DROP - EPS
        ok = before is not None and now is not None and now > before and fell
        streak = streak + 1 if ok else 0
        if streak >= PROBE_PATIENCE:
            return curve[t][0]
    return None


# ------------------------------------------------------------------------------ scoring

def summarize(rows: Sequence[Mapping], alarm: str) -> dict:
    """One alarm's counts, rates and delays over the runs it scored (rates None when undefined)."""
    scored = [r for r in rows if alarm not in r["not_scored"]]
    collapsed = [r for r in scored if r["label"] == COLLAPSED]
    healthy = [r for r in scored if r["label"] == HEALTHY]
    hits = [r for r in collapsed if r["alarms"][alarm] is not None]
    false = [r for r in healthy if r["alarms"][alarm] is not None]
    delays = sorted(r["alarms"][alarm] - r["onset"] for r in hits if r["onset"] is not None)
    return {"runs": len(scored), "collapsed": len(collapsed), "healthy": len(healthy),
            "hits": len(hits), "false_alarms": len(false),
            "false_alarm_rate": len(false) / len(healthy) if healthy else None,
            "misses": len(collapsed) - len(hits),
            "miss_rate": (len(collapsed) - len(hits)) / len(collapsed) if collapsed else None,
            "delays": delays, "median_delay": statistics.median(delays) if delays else None}


def score_run(method: str, seed: int | None, heldout: Sequence[Mapping], train: Sequence[Mapping],
              cfg: CollapseConfig) -> dict | str:
    """A run's record (label, onset, each alarm's step), or why it is skipped."""
    if not heldout:
        return "no held-out curve"
    key = headline_key(heldout)
    if key is None:
        return (f"no headline metric ({', '.join(m[0] for m in TASK_HEADLINE.values())}, "
                "<task>/pass@1) in its held-out curve")
    curve = heldout_curve(heldout, key)
    if len(curve) < MIN_EVALS:
        return f"{len(curve)} held-out evaluation(s) of {key}, fewer than {MIN_EVALS}"
    lab = label_run(curve)
    not_scored = {}
    if not trend_references(train) or len(_by_step(train)) <= TREND_REF_ROWS:
        not_scored["entropy_length_trend"] = (f"no entropy or completion_length in each of the first "
                                              f"{TREND_REF_ROWS} train rows, or no row after them")
    if not any(number(r.get("reward")) is not None for r in train):
        not_scored["reward_up_probe_down"] = "no train reward"
    events = lab_detector_events(heldout, key, train, cfg)
    alarms = {"lab_detector": events[0][1] if events else None,
              "entropy_length_trend": trend_alarm(train),
              "reward_up_probe_down": probe_alarm(curve, train)}
    for name in not_scored:
        alarms[name] = None
    return {"method": method, "seed": seed, "metric": key, "evaluations": len(curve),
            "peak_step": lab.peak_step, "peak": lab.peak, "final": curve[-1][1],
            "label": lab.label, "onset": lab.onset, "alarms": alarms,
            "delays": {a: s - lab.onset if s is not None and lab.onset is not None else None
                       for a, s in alarms.items()},
            "lab_events": [{"kind": k, "step": s} for k, s in events], "not_scored": not_scored}


COURSES = ("improved, then collapsed", "never improved", "fell below the base")


def independent_label(test_curve: Curve, start: float | None, final: float | None) -> dict | None:
    """The label from the test split (the `independent` rule), or None without the evidence.

    >>> independent_label([(0, 0.4), (50, 0.7), (100, 0.5), (150, 0.5)], None, None)["course"]
    'improved, then collapsed'
    >>> independent_label([], 0.40, 0.25)
    {'label': 'collapsed', 'onset': None, 'course': 'fell below the base', 'source': 'test endpoints'}
    >>> independent_label([], 0.40, 0.35)["label"]
    'healthy'
    """
    if len(test_curve) >= MIN_EVALS:
        lab = label_run(test_curve)
        course = ("" if lab.label == HEALTHY else COURSES[0] if lab.peak >= test_curve[0][1] + DELTA - EPS
                  else COURSES[1])
        return {"label": lab.label, "onset": lab.onset, "course": course, "source": "test curve"}
    if start is None or final is None:
        return None
    down = final <= start - DELTA + EPS
    return {"label": COLLAPSED if down else HEALTHY, "onset": None,
            "course": COURSES[2] if down else "", "source": "test endpoints"}


def _study_base(method: str) -> str:
    """The base run of a run's study: `base`, or `<preset>/base` for `<preset>/<arm>`."""
    preset, _, _ = method.rpartition("/")
    return f"{preset}/base" if preset else "base"


def score_independent(collected: Collected, rows: Sequence[Mapping]) -> dict:
    """The alarms (already computed per run in `rows`) against the independent label."""
    out, skipped = [], []
    for r in rows:
        run = collected.runs[r["method"]][r["seed"]]
        key = r["metric"]
        test_rows = getattr(run, "test", None) or []
        # The base's mean over its draws (params `base_draws`; the one evaluation where it has none).
        draws = [v for b in collected.runs.get(_study_base(r["method"]), {}).values()
                 if (v := number((b.metrics or {}).get(key))) is not None]
        start = sum(draws) / len(draws) if draws else None
        final = number((run.metrics or {}).get(key))
        lab = independent_label(heldout_curve(test_rows, key), start, final)
        if lab is None:
            skipped.append({"method": r["method"], "seed": r["seed"],
                            "reason": f"no test evidence of {key} (a test curve, or the base's and its "
                                      "final test evaluation)"})
            continue
        out.append({"method": r["method"], "seed": r["seed"], "metric": key, "start": start,
                    "final": final, **lab, "alarms": r["alarms"], "not_scored": r["not_scored"],
                    "delays": {a: s - lab["onset"] if s is not None and lab["onset"] is not None else None
                               for a, s in r["alarms"].items()},
                    "val_label": r["label"], "val_peak_step": r["peak_step"]})
    courses = {c: sum(x.get("course") == c for x in out) for c in COURSES}
    return {"rule": RULES["independent"],
            "source": "the test split (each run's final test evaluation and its study's base; a test "
                      "curve where one was recorded); no alarm reads it",
            "runs": out, "skipped": skipped, "courses": courses,
            "sources": {src: sum(x["source"] == src for x in out) for src in ("test curve", "test endpoints")},
            "summary": {a: summarize(out, a) for a in ALARMS}}


def score(collected: Collected, collapse_cfg: CollapseConfig) -> dict:
    """The JSON record: the rules, one row per labelled run, the skips and each alarm's summary.

    A stale run (`RunData.stale`: trained from another base than its study's current one, or
    evaluated from another training; evals/lineage.py) is left out, as every table and claim
    leaves it out, and listed in `left_out` with why: its curves and its test score stand on a
    base the study's own base row is not, so neither label could be read against it."""
    rows, skipped, notes, left_out = [], [], [], []
    for method, seeds in collected.runs.items():
        if method.rpartition("/")[2] == "base":  # a study's base and its draws: no training
            continue
        for seed, run in seeds.items():
            where = f"{method}/seed{seed}"
            if stale := getattr(run, "stale", ""):
                left_out.append({"method": method, "seed": seed, "reason": stale})
                continue
            result = score_run(method, seed, run.heldout, run.train, collapse_cfg)
            if isinstance(result, str):
                skipped.append({"method": method, "seed": seed, "reason": result})
                notes.append(f"{where}: skipped, {result}")
                continue
            notes += [f"{where}: not scored by {a}: {why}" for a, why in result["not_scored"].items()]
            rows.append(result)
    return {"rules": RULES,
            "constants": {"delta": DELTA, "min_evals": MIN_EVALS, "trend_ref_rows": TREND_REF_ROWS,
                          "trend_frac": TREND_FRAC, "trend_patience": TREND_PATIENCE,
                          "probe_drop": PROBE_DROP, "probe_patience": PROBE_PATIENCE, "eps": EPS},
            "collapse_config": asdict(collapse_cfg),
            "runs": rows, "skipped": skipped, "left_out": left_out, "notes": notes,
            "summary": {a: summarize(rows, a) for a in ALARMS},
            "independent": score_independent(collected, rows)}


# ------------------------------------------------------------------------------ rendering

def _num(x: float | None) -> str:
    """A rate or median: two decimals (integers as integers), "—" for None.

    A rate below 0.01 keeps one significant digit (1 false alarm in 243 runs is 0.004, not 0).

    >>> [_num(x) for x in (None, 0.25, 1.0, 12.5, -25, 0.0041)]
    ['—', '0.25', '1', '12.5', '−25', '0.004']
    """
    if x is None:
        return "—"
    text = (str(int(x)) if float(x).is_integer()
            else (f"{x:.2f}" if abs(x) >= 0.01 else f"{x:.1g}").rstrip("0").rstrip("."))
    return text.replace("-", "−")


def _delay(d: int) -> str:
    return "0" if d == 0 else f"{d:+d}".replace("-", "−")


HEADER = ["alarm", "runs", "collapsed", "healthy", "false alarms (rate)", "misses (rate)",
          "median delay (steps)", "hit delays"]


def summary_rows(record: Mapping) -> list[list[str]]:
    """The summary table's cells, one row per alarm (`record` the whole record, or its
    `independent` part)."""
    out = []
    for name in ALARMS:
        s = record["summary"][name]
        out.append([TITLES[name], str(s["runs"]), str(s["collapsed"]), str(s["healthy"]),
                    f"{s['false_alarms']} of {s['healthy']} ({_num(s['false_alarm_rate'])})",
                    f"{s['misses']} of {s['collapsed']} ({_num(s['miss_rate'])})",
                    _num(s["median_delay"]), ", ".join(_delay(d) for d in s["delays"]) or "—"])
    return out


def counts(record: Mapping) -> str:
    """`21 runs labelled (1 collapsed, 20 healthy), 0 skipped`."""
    rows = record["runs"]
    collapsed = sum(r["label"] == COLLAPSED for r in rows)
    return (f"{len(rows)} runs labelled ({collapsed} collapsed, {len(rows) - collapsed} healthy), "
            f"{len(record['skipped'])} skipped")


def label_counts(record: Mapping) -> tuple[int, int, int]:
    """(runs labelled, collapsed, healthy) by the independent label (the test split): the lab's
    collapse label, which the report's first screen and the README count."""
    rows = (record.get("independent") or {}).get("runs") or []
    collapsed = sum(r["label"] == COLLAPSED for r in rows)
    return len(rows), collapsed, len(rows) - collapsed


def detector_rates(record: Mapping) -> str:
    """The lab detector's error rates against the independent label, in words.

    >>> detector_rates({"independent": {"summary": {"lab_detector": {"collapsed": 4, "misses": 1,
    ...     "miss_rate": 0.25, "healthy": 200, "false_alarms": 1, "false_alarm_rate": 0.005}}}})
    'misses 1 of 4 collapsed runs (0.25) and false-alarms on 1 of 200 healthy runs (0.005)'
    """
    s = ((record.get("independent") or {}).get("summary") or {}).get("lab_detector")
    if not s:
        return "no run labelled, so no rate"
    return (f"misses {s['misses']} of {s['collapsed']} collapsed runs ({_num(s['miss_rate'])}) and "
            f"false-alarms on {s['false_alarms']} of {s['healthy']} healthy runs "
            f"({_num(s['false_alarm_rate'])})")


def independent_counts(record: Mapping) -> str:
    """`66 runs labelled from the test split (10 collapsed: 9 fell below the base, ...), 0 skipped`."""
    ind = record["independent"]
    rows = ind["runs"]
    collapsed = sum(r["label"] == COLLAPSED for r in rows)
    courses = ", ".join(f"{n} {c}" for c, n in ind["courses"].items() if n)
    sources = ", ".join(f"{n} from the {s}" for s, n in ind["sources"].items() if n)
    return (f"{len(rows)} runs labelled from the test split ({sources or 'none'}; {collapsed} collapsed"
            + (f": {courses}" if courses else "") + f", {len(rows) - collapsed} healthy), "
            f"{len(ind['skipped'])} skipped")


RUN_HEADER = ["method", "seed", "metric", "peak @ step", "final", "label", "onset",
              *(f"{TITLES[a]} step" for a in ALARMS)]


def run_rows(record: Mapping) -> list[list[str]]:
    """The per-run table's cells (RUN_HEADER): the label, and each alarm's step (n/a: not scored)."""
    return [[r["method"], str(r["seed"]), r["metric"], f"{r['peak']:.3f} @ {r['peak_step']}",
             f"{r['final']:.3f}", r["label"], "—" if r["onset"] is None else str(r["onset"]),
             *("n/a" if a in r["not_scored"] else "—" if r["alarms"][a] is None
               else str(r["alarms"][a]) for a in ALARMS)] for r in record["runs"]]
