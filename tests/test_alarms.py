"""How often the collapse alarms are right (flows/alarms.py): hand-made curves whose labels,
alarm steps and delays are worked out by hand in the comments, and the report's section."""

from __future__ import annotations

import json
import re

import pytest

from core.params import load
from flows import alarms as al
from flows import report as rep
from flows.report_collect import Collected, RunData
from models.collapse import CollapseConfig
from tests.test_report import make_data, parse_tables, write

CFG = CollapseConfig()  # params.yaml's thresholds: min_drop 0.1, patience 2, entropy_floor 0.005


def heldout(values, rewards, every=25, key="arith/pass@1"):
    """Held-out rows at steps 0, every, 2 every...; step 0 has no train reward (the base)."""
    return [{"step": i * every, key: v, "arith/n": 100, "train/reward": r}
            for i, (v, r) in enumerate(zip(values, rewards))]


def train(last, reward=lambda s: 0.01 * s, entropy=lambda s: 0.1, length=lambda s: 40.0):
    """Train rows every 5 steps up to `last`."""
    return [{"step": s, "reward": reward(s), "reward_std": 0.3, "entropy": entropy(s),
             "completion_length": length(s), "clipped_ratio": 0.0} for s in range(5, last + 1, 5)]


# A: a one-evaluation dip that recovers. Max 0.52 at step 75, so the collapse line is 0.42; the
# last two (0.52, 0.50) are above it: healthy. The lab's reward hacking sees the dip at step 50
# (0.35 <= best 0.50 - 0.1 while reward 0.3 >= 0.2) for one evaluation only (patience 2), and 0.52
# at 75 is a new best: no event; entropy and length are flat: the lab detector stays silent, and
# so does the trend. "Reward up, probe down" fires at 50: train reward mean over (25, 50] = 0.40
# > over (0, 25] = 0.15 while the probe fell 0.50 -> 0.35 (0.15 >= 0.05): a false alarm.
DIP = RunData(heldout=heldout([0.30, 0.50, 0.35, 0.52, 0.50], [None, 0.2, 0.3, 0.4, 0.5]),
              train=train(100))

# B: peaks and falls and stays down. Max 0.60 at step 50, line 0.50; 0.52 at 75 is above it, then
# 0.45, 0.40, 0.42 stay below: collapsed, onset 100 (the 0.30 and 0.50 before the peak do not count).
# Lab: reward hacking holds at 100 (0.45 <= 0.50, reward 0.5 >= 0.3 at the best step) and 125
# -> fires at 125, delay +25. Trend: entropy 0.1 to step 75, 0.04 from 80 (< 0.5 x 0.1; above the
# lab's 0.005 floor) -> second low row 85, delay -15. Probe: at 75 the reward window rose
# (0.65 > 0.40) and the probe fell 0.60 -> 0.52 (0.08 >= 0.05) -> 75, delay -25.
FALL = RunData(heldout=heldout([0.30, 0.50, 0.60, 0.52, 0.45, 0.40, 0.42],
                               [None, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]),
               train=train(150, entropy=lambda s: 0.1 if s <= 75 else 0.04))

# C: the entropy collapses, the held-out score does not. Curve 0.30 .. 0.45, 0.44: healthy. Entropy
# 0.001 from step 55 (< floor 0.005 and < 0.5 x 0.1): the lab's entropy collapse is confirmed at
# the second such row, 60, and so is the trend -> both are false alarms under the label. The train
# reward is flat (0.3): never "higher" than the window before, so the probe alarm stays silent.
ENTROPY = RunData(heldout=heldout([0.30, 0.40, 0.45, 0.45, 0.44], [None, 0.3, 0.3, 0.3, 0.3]),
                  train=train(100, reward=lambda s: 0.3, entropy=lambda s: 0.1 if s <= 50 else 0.001))


def collected(**runs: RunData) -> Collected:
    """`name=run` as runs[name][0], and a base without curves (never scored)."""
    return Collected({"base": {None: RunData(metrics={"arith/pass@1": 0.3})},
                      **{name: {0: run} for name, run in runs.items()}}, [])


def row(record: dict, method: str) -> dict:
    return next(r for r in record["runs"] if r["method"] == method)


# ------------------------------------------------------------------------------ the label

def test_the_label_needs_two_final_evaluations_down_by_delta() -> None:
    # Fell and stayed: max 0.3, line 0.2; 0.3 - 0.1 is 0.19999999999999998 in floats, and 0.2
    # still counts (the EPS slack): collapsed from step 50.
    assert al.label_run([(0, 0.1), (25, 0.3), (50, 0.2), (75, 0.2)]) == al.Label("collapsed", 50, 25, 0.3)
    assert al.label_run([(0, 0.3), (25, 0.6), (50, 0.5), (75, 0.5)]) == al.Label("collapsed", 50, 25, 0.6)
    # Down in the last evaluation only: healthy (one evaluation is not "stayed down").
    assert al.label_run([(0, 0.3), (25, 0.6), (50, 0.6), (75, 0.45)]).label == "healthy"
    # 0.09 below the max for good: not far enough.
    assert al.label_run([(0, 0.3), (25, 0.6), (50, 0.51), (75, 0.51)]).label == "healthy"
    # A later tie at the max resets the onset: the trailing run starts after it.
    assert al.label_run([(0, 0.6), (10, 0.4), (20, 0.6), (30, 0.45), (40, 0.4)]).onset == 30
    # Below the peak since the start (the base was best): collapsed from the first evaluation.
    assert al.label_run([(0, 0.6), (25, 0.4), (50, 0.45)]) == al.Label("collapsed", 25, 0, 0.6)
    with pytest.raises(ValueError, match="at least 3"):
        al.label_run([(0, 0.3), (25, 0.6)])


# ------------------------------------------------------------------------------ the alarms

def test_the_trend_watches_only_the_rows_after_its_reference_window() -> None:
    # Reference: entropy mean of rows 5, 10, 15 = (1.0 + 1.0 + 0.1) / 3 = 0.7, line 0.35. Row 15
    # (0.1) is inside the reference window and is not watched; row 20 (0.1) is low, 25 (1.0) breaks
    # the streak, 30 and 35 (0.2) are the two consecutive low rows -> 35.
    rows = [{"step": s, "entropy": e, "completion_length": 40.0}
            for s, e in [(5, 1.0), (10, 1.0), (15, 0.1), (20, 0.1), (25, 1.0), (30, 0.2), (35, 0.2)]]
    assert al.trend_references(rows) == pytest.approx({"entropy": 0.7, "completion_length": 40.0})
    assert al.trend_alarm(rows) == 35
    # The length alone fires too: reference 40, line 20; 19 at rows 25 and 30 -> 30.
    rows = [{"step": s, "entropy": 0.1, "completion_length": n}
            for s, n in [(5, 40), (10, 40), (15, 40), (20, 30), (25, 19), (30, 19)]]
    assert al.trend_alarm(rows) == 30
    # A signal missing from one of the first 3 rows has no reference: never fires.
    rows[1] = {"step": 10, "entropy": 0.1}
    assert al.trend_references(rows) == {"entropy": pytest.approx(0.1)} and al.trend_alarm(rows) is None
    # Fewer than 3 rows: no reference at all.
    assert al.trend_references(rows[:2]) == {}


def test_the_probe_alarm_compares_consecutive_reward_windows_strictly() -> None:
    curve = [(0, 0.5), (10, 0.6), (20, 0.6), (30, 0.5)]  # the probe falls 0.1 at t = 3 only
    # Windows (0,10] 0.9, (10,20] 0.2, (20,30] 0.3: at t = 3 the reward rose (0.3 > 0.2) -> 30.
    # (Against the mean of everything before, 0.55, it would not have.)
    rewards = {5: 0.9, 10: 0.9, 15: 0.2, 20: 0.2, 25: 0.3, 30: 0.3}
    assert al.probe_alarm(curve, [{"step": s, "reward": r} for s, r in rewards.items()]) == 30
    # A flat reward is not "higher": no alarm.
    assert al.probe_alarm(curve, [{"step": s, "reward": 0.3} for s in rewards]) is None
    # A probe drop of 0.04 (< 0.05) with the reward rising: no alarm.
    assert al.probe_alarm([(0, 0.5), (10, 0.6), (20, 0.6), (30, 0.56)],
                          [{"step": s, "reward": 0.01 * s} for s in rewards]) is None
    # A drop at t = 1 has no window before it (step 0 is the base): no alarm.
    assert al.probe_alarm([(0, 0.6), (10, 0.4), (20, 0.4)],
                          [{"step": s, "reward": 0.01 * s} for s in (5, 10, 15, 20)]) is None


# ------------------------------------------------------------------------------ the runs

def test_a_dip_that_recovers_is_healthy_and_only_the_probe_alarm_fires() -> None:
    r = row(al.score(collected(dip=DIP), CFG), "dip")
    assert (r["label"], r["onset"], r["peak_step"], r["peak"]) == ("healthy", None, 75, 0.52)
    assert r["alarms"] == {"lab_detector": None, "entropy_length_trend": None, "reward_up_probe_down": 50}
    assert r["delays"] == {a: None for a in al.ALARMS} and r["not_scored"] == {}


def test_a_run_that_peaks_falls_and_stays_down_is_collapsed_and_each_alarm_dated() -> None:
    r = row(al.score(collected(fall=FALL), CFG), "fall")
    assert (r["label"], r["onset"], r["peak_step"], r["final"]) == ("collapsed", 100, 50, 0.42)
    assert r["alarms"] == {"lab_detector": 125, "entropy_length_trend": 85, "reward_up_probe_down": 75}
    assert r["delays"] == {"lab_detector": 25, "entropy_length_trend": -15, "reward_up_probe_down": -25}
    assert r["lab_events"] == [{"kind": "reward_hacking", "step": 125}]


def test_an_entropy_collapse_on_a_healthy_curve_is_a_false_alarm_of_both_entropy_alarms() -> None:
    r = row(al.score(collected(entropy=ENTROPY), CFG), "entropy")
    assert r["label"] == "healthy"
    assert r["lab_events"] == [{"kind": "entropy", "step": 60}]
    assert r["alarms"] == {"lab_detector": 60, "entropy_length_trend": 60, "reward_up_probe_down": None}


def test_the_summary_counts_hits_false_alarms_misses_and_delays() -> None:
    # Over A (healthy), B (collapsed), C (healthy): per alarm 3 runs, 1 collapsed, 2 healthy.
    # lab: false alarm on C (1 of 2), hit on B (+25); trend: false alarm on C, hit on B (-15);
    # probe: false alarm on A, hit on B (-25). No misses: the miss rate is a real 0.
    s = al.score(collected(dip=DIP, fall=FALL, entropy=ENTROPY), CFG)["summary"]
    assert s["lab_detector"] == {"runs": 3, "collapsed": 1, "healthy": 2, "hits": 1, "false_alarms": 1,
                                 "false_alarm_rate": 0.5, "misses": 0, "miss_rate": 0.0,
                                 "delays": [25], "median_delay": 25}
    assert (s["entropy_length_trend"]["false_alarms"], s["entropy_length_trend"]["delays"]) == (1, [-15])
    assert (s["reward_up_probe_down"]["false_alarms"], s["reward_up_probe_down"]["delays"]) == (1, [-25])


def test_a_lab_alarm_that_misses_is_counted_as_a_miss() -> None:
    # B's held-out curve (collapsed, onset 100) with a falling train/reward: 0.7 at the best step
    # (50), then 0.6, 0.5, ... -> never >= 0.7, so the lab's reward hacking never holds; entropy
    # 0.1 and length flat: no lab event. A miss (1 of 1), no hit, so no delay and the median is None.
    fall = RunData(heldout=heldout([0.30, 0.50, 0.60, 0.52, 0.45, 0.40, 0.42],
                                   [None, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]), train=train(150))
    s = al.score(collected(fall=fall), CFG)["summary"]["lab_detector"]
    assert (s["misses"], s["miss_rate"], s["hits"], s["median_delay"]) == (1, 1.0, 0, None)


def test_a_task_outside_task_headline_is_labelled_by_its_pass_at_1() -> None:
    """arith_ref (the cot_reference study) is judged by arith_ref/pass@1, as the report judges it:
    B's curve under that key gives B's label and onset, not a skip."""
    ref = RunData(heldout=[{k.replace("arith/", "arith_ref/"): v for k, v in row.items()}
                           for row in FALL.heldout], train=FALL.train)
    record = al.score(collected(ref=ref), CFG)
    assert record["skipped"] == []
    (run,) = record["runs"]
    assert (run["label"], run["onset"]) == ("collapsed", 100)


def test_missing_or_short_curves_are_counted_skips_with_a_note() -> None:
    short = RunData(heldout=heldout([0.3, 0.5], [None, 0.2]), train=train(25))
    gaps = RunData(heldout=heldout([0.3, None, 0.5], [None, 0.2, 0.3]), train=train(50))  # 2 values
    no_task = RunData(heldout=[{"step": 0, "train/reward": None}, {"step": 25, "train/reward": 0.2}])
    no_train = RunData(heldout=DIP.heldout)  # labelled; only the lab detector can score it
    record = al.score(collected(empty=RunData(), short=short, gaps=gaps, no_task=no_task,
                                no_train=no_train), CFG)
    assert [(s["method"], s["seed"]) for s in record["skipped"]] == [
        ("empty", 0), ("short", 0), ("gaps", 0), ("no_task", 0)]
    reasons = {s["method"]: s["reason"] for s in record["skipped"]}
    assert reasons["empty"] == "no held-out curve"
    assert reasons["short"] == "2 held-out evaluation(s) of arith/pass@1, fewer than 3"
    assert reasons["gaps"].startswith("2 held-out evaluation(s)")
    assert reasons["no_task"].startswith("no headline metric")
    assert "empty/seed0: skipped, no held-out curve" in record["notes"]
    assert [r["method"] for r in record["runs"]] == ["no_train"]  # base is never scored
    r = record["runs"][0]
    assert set(r["not_scored"]) == {"entropy_length_trend", "reward_up_probe_down"}
    s = record["summary"]
    assert s["lab_detector"]["runs"] == 1 and s["entropy_length_trend"]["runs"] == 0
    assert s["reward_up_probe_down"] == {"runs": 0, "collapsed": 0, "healthy": 0, "hits": 0,
                                         "false_alarms": 0, "false_alarm_rate": None, "misses": 0,
                                         "miss_rate": None, "delays": [], "median_delay": None}
    assert "1 runs labelled (0 collapsed, 1 healthy), 4 skipped" in rep.alarms_markdown(record)


def test_with_no_healthy_run_the_false_alarm_rate_is_none_and_renders_as_a_dash() -> None:
    record = al.score(collected(fall=FALL), CFG)
    s = record["summary"]["lab_detector"]
    assert (s["healthy"], s["false_alarms"], s["false_alarm_rate"]) == (0, 0, None)
    assert s["miss_rate"] == 0.0  # one collapsed run, caught: a real zero
    md = rep.alarms_markdown(record).partition("Against the lab detector's own held-out rule")[2]
    lab = next(line for line in md.splitlines() if line.startswith("| lab detector"))
    assert lab == "| lab detector (models/collapse.py) | 1 | 1 | 0 | 0 of 0 (—) | 0 of 1 (0) | 25 | +25 |"
    json.dumps(record, allow_nan=False)  # the record is plain JSON: no NaN, no objects


# ------------------------------------------------------------------------------ the report

@pytest.fixture(autouse=True)
def _default_preset(monkeypatch):
    """`load()` reads LAB_PRESET: these tests mean params.yaml's own preset (none)."""
    monkeypatch.delenv("LAB_PRESET", raising=False)


def test_the_report_writes_alarms_json_and_a_section_after_the_collapse_events(tmp_path) -> None:
    # make_data: held-out arith/pass@1 = 0.2 + 0.01 k ± 0.005 step at steps 0..40, k = len(method)
    # + seed. Even k falls 0.05 per 10 steps: max at step 0, at or below max - 0.1 from step 20 on:
    # collapsed, onset 20 (rlvr/0 k=4, random/0 k=6, rlvrr_direct/0 k=12); odd k rises: healthy
    # (rlvr/1 k=5, rlme_long/0 k=9). Lab: train/reward 0.2 throughout (step 0 takes the first
    # window's), so hacking holds at 20 and 30 -> fires at 30 on the falling runs (delay +10), never
    # on the rising ones; entropy 0.45..0.30 and length 39..36 do not collapse.
    data = make_data(tmp_path)
    write(data / "plots" / "short" / "seed0" / "heldout.json", [{"step": 0, "arith/pass@1": 0.3}])
    out = tmp_path / "reports"
    rep.build(out, data, order=["rlvr", "random"])
    record = json.loads((out / "alarms.json").read_text())
    assert set(record) == {"rules", "constants", "collapse_config", "runs", "skipped", "left_out", "notes",
                           "summary", "independent"}
    assert record["left_out"] == []  # no stale run here (tests/test_report.py has one)
    assert record["collapse_config"] == load().collapse.model_dump()  # params.yaml's by default
    labels = {(r["method"], r["seed"]): (r["label"], r["onset"], r["alarms"]["lab_detector"])
              for r in record["runs"]}
    assert labels == {("rlvr", 0): ("collapsed", 20, 30), ("rlvr", 1): ("healthy", None, None),
                      ("random", 0): ("collapsed", 20, 30), ("rlvrr_direct", 0): ("collapsed", 20, 30),
                      ("rlme_long", 0): ("healthy", None, None)}
    assert record["skipped"] == [{"method": "short", "seed": 0,
                                  "reason": "1 held-out evaluation(s) of arith/pass@1, fewer than 3"}]
    lab = record["summary"]["lab_detector"]
    assert (lab["runs"], lab["collapsed"], lab["healthy"], lab["false_alarms"], lab["misses"],
            lab["delays"], lab["median_delay"]) == (5, 3, 2, 0, 0, [10, 10, 10], 10)
    assert set(record["summary"]) == set(al.ALARMS)

    page = (out / "index.html").read_text()
    order = re.findall(r"<section id='([^']+)'>", page)
    assert order.index("alarms") == order.index("collapse") + 1
    assert "<a href='#alarms'>" in page.partition("</header>")[0]
    assert "Against a label no alarm reads (the test split)" in parse_tables(page)
    table = parse_tables(page)["Against the lab detector's own held-out rule"]
    assert table[0][:4] == ["alarm", "runs", "collapsed", "healthy"]
    assert [r[0] for r in table[1:]] == [al.TITLES[a] for a in al.ALARMS]
    assert table[1][4:7] == ["0 of 2 (0)", "0 of 3 (0)", "10"]
    assert len(parse_tables(page)["Alarms per run"]) == 1 + 5

    summary = (out / "summary.md").read_text()
    assert summary.index("## Collapse events") < summary.index("## Collapse alarms: how often they are right")
    assert "| lab detector (models/collapse.py) | 5 | 3 | 2 | 0 of 2 (0) | 0 of 3 (0) | 10 |" in summary


def test_the_report_reads_the_collapse_thresholds_from_the_params(tmp_path) -> None:
    # An entropy floor of 1.0 is above every make_data entropy (0.45 at step 10, 0.40 at 20): the
    # lab's entropy collapse fires at the second train row, step 20, on every run.
    data = make_data(tmp_path)
    params = load()
    params = params.model_copy(update={"collapse": params.collapse.model_copy(update={"entropy_floor": 1.0})})
    rep.report(params, tmp_path / "reports", data, track=False)
    record = json.loads((tmp_path / "reports" / "alarms.json").read_text())
    assert record["collapse_config"]["entropy_floor"] == 1.0
    assert {r["alarms"]["lab_detector"] for r in record["runs"]} == {20}
    # build() takes the config directly too.
    rep.build(tmp_path / "direct", data, collapse=CollapseConfig(entropy_floor=1.0, patience=3))
    record = json.loads((tmp_path / "direct" / "alarms.json").read_text())
    assert {r["alarms"]["lab_detector"] for r in record["runs"]} == {30}


# ------------------------------------------------------------------------------ the independent label

def test_the_independent_label_reads_the_test_split_not_the_curves_the_alarms_read() -> None:
    """FALL collapses on its held-out (val) curve, which the lab detector and the probe read; on
    the test split it ends above its base: the independent label calls it healthy, so those alarms
    are false alarms against it. DIP ends 0.15 below the base on the test split: collapsed there,
    a miss for every alarm that stayed silent on its val curve."""
    fall = RunData(heldout=FALL.heldout, train=FALL.train, metrics={"arith/pass@1": 0.45})
    dip = RunData(heldout=DIP.heldout, train=DIP.train, metrics={"arith/pass@1": 0.15})
    record = al.score(collected(fall=fall, dip=dip), CFG)
    assert row(record, "fall")["label"] == "collapsed"          # the detector's own rule
    ind = {r["method"]: r for r in record["independent"]["runs"]}
    assert (ind["fall"]["label"], ind["fall"]["source"]) == ("healthy", "test endpoints")
    assert (ind["dip"]["label"], ind["dip"]["course"]) == ("collapsed", "fell below the base")
    assert ind["fall"]["val_label"] == "collapsed" and ind["dip"]["onset"] is None
    lab = record["independent"]["summary"]["lab_detector"]
    assert (lab["false_alarms"], lab["misses"], lab["delays"]) == (1, 1, [])
    probe = record["independent"]["summary"]["reward_up_probe_down"]
    assert (probe["hits"], probe["false_alarms"]) == (1, 1)  # fires on both: 50 on dip, 75 on fall
    assert "Against a label no alarm reads (the test split):" in rep.alarms_markdown(record)


def test_a_test_curve_separates_never_improved_from_improved_then_collapsed() -> None:
    def test_rows(values):
        return [{"step": 25 * i, "arith/pass@1": v} for i, v in enumerate(values)]

    rose = RunData(heldout=DIP.heldout, train=DIP.train, metrics={"arith/pass@1": 0.35},
                   test=test_rows([0.30, 0.60, 0.45, 0.40]))
    sank = RunData(heldout=DIP.heldout, train=DIP.train, metrics={"arith/pass@1": 0.15},
                   test=test_rows([0.30, 0.32, 0.15, 0.15]))
    record = al.score(collected(rose=rose, sank=sank), CFG)
    ind = {r["method"]: r for r in record["independent"]["runs"]}
    assert (ind["rose"]["label"], ind["rose"]["course"], ind["rose"]["onset"]) == (
        "collapsed", "improved, then collapsed", 50)
    assert (ind["sank"]["course"], ind["sank"]["source"]) == ("never improved", "test curve")
    assert record["independent"]["courses"] == {"improved, then collapsed": 1, "never improved": 1,
                                                "fell below the base": 0}
    # The probe fires at 50 on both (DIP's val curve): delay 0 from rose's onset, 0 from sank's.
    assert record["independent"]["summary"]["reward_up_probe_down"]["delays"] == [0, 0]


def test_the_held_out_callback_keeps_the_test_split_apart_from_what_the_alarms_read() -> None:
    from types import SimpleNamespace

    from models.callbacks import HeldoutCallback
    from models.collapse import CollapseMonitor

    class Model:
        training = False

        def eval(self):
            return self

        def train(self):
            return self

    monitor = CollapseMonitor(CFG)
    cb = HeldoutCallback(lambda m: {"arith/pass@1": 0.5}, 10, "arith/pass@1", monitor,
                         label_fn=lambda m: {"arith/pass@1": 0.9})
    cb._evaluate(Model(), SimpleNamespace(global_step=10, log_history=[]))
    assert cb.label_history == [{"step": 10, "arith/pass@1": 0.9}]
    assert cb.history[0]["arith/pass@1"] == 0.5 and monitor.best_heldout == 0.5
