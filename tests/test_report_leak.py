"""flows/report_leak.py: arith pass@1 on the leaked and on the clean test items, apart."""

from __future__ import annotations

from html import escape
from statistics import mean

import pytest

from core.params import ROOT, load
from flows.report_collect import RunData
from flows.report_leak import (
    EXPLAIN,
    NO_ITEMS,
    NO_LEAK,
    base_leaks,
    leak_html,
    leak_markdown,
    leak_rows,
    leak_split,
    leaking_studies,
)
from models.tiny import LEAK_SHARE, is_leaked

IDS = [f"arith-test-{i:05d}" for i in range(24)]
VALUES = [(i % 5) / 4 for i in range(len(IDS))]


def _items(ids=IDS, values=VALUES, bench="arith") -> dict:
    return {bench: {"headline": "pass@1", "ids": list(ids),
                    "metrics": {"pass@1": list(values), "pass@k": [1.0] * len(ids)}}}


def _expected(ids=IDS, values=VALUES, share=LEAK_SHARE):
    leaked = [v for i, v in zip(ids, values) if v is not None and is_leaked(i, share)]
    clean = [v for i, v in zip(ids, values) if v is not None and not is_leaked(i, share)]
    return leaked, clean


def test_fixture_has_both_kinds_of_item():
    # Every test below means something only if the ids fall on both sides of the hash.
    leaked, clean = _expected()
    assert len(leaked) >= 3 and len(clean) >= 3
    assert mean(leaked) != mean(clean)


def test_split_means_and_counts():
    leaked, clean = _expected()
    split = leak_split(_items())
    assert split == {"leaked": pytest.approx(mean(leaked)), "clean": pytest.approx(mean(clean)),
                     "n_leaked": len(leaked), "n_clean": len(clean)}
    assert split["n_leaked"] + split["n_clean"] == len(IDS)


def test_null_rows_are_left_out():
    values = list(VALUES)
    first_leaked = next(k for k, i in enumerate(IDS) if is_leaked(i))
    values[first_leaked] = None
    leaked, clean = _expected(values=values)
    split = leak_split(_items(values=values))
    assert split["n_leaked"] == len(leaked) == len(_expected()[0]) - 1
    assert split["leaked"] == pytest.approx(mean(leaked))
    assert split["clean"] == pytest.approx(mean(clean))


def test_share_decides_which_items_leaked():
    everything = leak_split(_items(), share=1.0)
    assert everything == {"leaked": pytest.approx(mean(VALUES)), "clean": None,
                          "n_leaked": len(IDS), "n_clean": 0}
    nothing = leak_split(_items(), share=0.0)
    assert nothing["leaked"] is None and nothing["n_clean"] == len(IDS)


def test_no_arith_gives_none():
    assert leak_split(_items(bench="facts")) is None
    assert leak_split({}) is None
    no_pass = {"arith": {"headline": "pass@1", "ids": IDS, "metrics": {"pass@k": [1.0] * len(IDS)}}}
    assert leak_split(no_pass) is None


def test_malformed_items_raise_one_line():
    with pytest.raises(ValueError, match=r"run/items\.json: arith/pass@1: expected a list of 24 values") as e:
        leak_split(_items(values=VALUES[:-1]), where="run/items.json")
    assert "\n" not in str(e.value)


def _run(items=None, stale="") -> RunData:
    return RunData(items=items, stale=stale)


def _runs() -> dict:
    low = [0.0] * len(IDS)
    return {
        "arm": {0: _run(_items())},                          # the default study: not leaking
        "leaked/base": {2: _run(_items(values=low)), None: _run(_items())},
        "leaked/arm": {1: _run(_items(), stale="trained from base 1234"), 0: _run(_items()),
                       3: _run(None), 4: _run(_items(bench="facts"))},
    }


def test_rows_name_runs_as_the_report_does_and_only_the_measured():
    leaked, clean = _expected()
    rows, notes = leak_rows(_runs(), {"leaked"})
    assert notes == []
    # Base first, its draw after it; the stale seed, the run without items and the one without
    # arith are not rows; the default study (not leaking) has none.
    assert [r[0] for r in rows] == ["leaked/base", "leaked/base/draw2", "leaked/arm/seed0"]
    gap = mean(leaked) - mean(clean)
    base = rows[0]
    assert base[1] == f"{mean(leaked):.3f}" and base[2] == f"{mean(clean):.3f}"
    assert base[3] == ("+" if gap > 0 else "−") + f"{abs(gap):.3f}"
    assert base[4] == f"{len(leaked)} / {len(clean)}"
    assert rows[1][1:4] == ["0.000", "0.000", "±0.000"]


def test_rows_of_every_leaking_study():
    rows, _ = leak_rows(_runs(), {"", "leaked"})
    assert [r[0] for r in rows][0] == "arm/seed0"
    assert leak_rows(_runs(), set()) == ([], [])


def test_a_side_without_items_reads_as_a_dash():
    only_clean = [i for i in IDS if not is_leaked(i)]
    rows, _ = leak_rows({"leaked/base": {None: _run(_items(only_clean, [1.0] * len(only_clean)))}}, {"leaked"})
    assert rows == [["leaked/base", "—", "1.000", "—", f"0 / {len(only_clean)}"]]


def test_malformed_items_become_a_note_not_a_row():
    runs = {"leaked/base": {None: _run(_items(values=VALUES[:3]))}, "leaked/arm": {0: _run(_items())}}
    rows, notes = leak_rows(runs, {"leaked"})
    assert [r[0] for r in rows] == ["leaked/arm/seed0"]
    assert len(notes) == 1 and notes[0].startswith("leaked/base: items.json: arith/pass@1")


def test_html_when_no_study_leaks():
    assert leak_html(_runs(), set()) == "<p>No study&#x27;s base leaks yet (preset leaked, docs/bases.md).</p>"
    assert "preset leaked, docs/bases.md" in NO_LEAK
    assert leak_markdown(_runs(), set()) == NO_LEAK


def test_html_when_a_study_leaks():
    out = leak_html(_runs(), {"leaked"})
    assert out.startswith(f"<p class='muted'>{escape(EXPLAIN)}</p><table class='numbers'>")
    assert out.count("<tr>") == 1 + 3  # the header and three runs
    assert "<td>leaked/base/draw2</td>" in out
    assert "<td>arm/seed0</td>" not in out
    md = leak_markdown(_runs(), {"leaked"})
    assert md.startswith(EXPLAIN) and "| leaked/arm/seed0 |" in md


def test_html_when_a_leaking_study_has_no_arith_items():
    assert leak_html({"leaked/base": {None: _run(None)}}, {"leaked"}) == f"<p>{escape(NO_ITEMS)}</p>"


def test_html_escapes_names_and_notes():
    malformed = {"arith": {"ids": ["a"], "metrics": {"pass@1": []}}}
    runs = {"leaked/<b>&": {0: _run(_items())}, "leaked/<i>": {0: _run(malformed)}}
    out = leak_html(runs, {"leaked"})
    assert "<td>leaked/&lt;b&gt;&amp;/seed0</td>" in out
    assert "Unreadable: leaked/&lt;i&gt;/seed0: items.json: arith/pass@1" in out
    assert "<b>" not in out and "<i>" not in out


def test_leaking_studies_read_each_study_s_params(monkeypatch):
    monkeypatch.delenv("LAB_PRESET", raising=False)
    default, leaky = load(), load(preset="leaked")
    assert not base_leaks(default) and base_leaks(leaky)
    runs = {"arm": {}, "base": {}, "leaked/base": {}, "leaked.seed1/arm": {}, "hint_copier/arm": {},
            "no_such_preset/base": {}}
    assert leaking_studies(runs, default, ROOT) == {"leaked", "leaked.seed1"}
    assert leaking_studies(runs, leaky, ROOT) == {"", "leaked", "leaked.seed1"}
    assert leaking_studies(runs, None, ROOT) == {"leaked", "leaked.seed1"}  # params.yaml's own


def test_a_base_from_a_path_does_not_leak():
    leaky = load(preset="leaked")
    assert not base_leaks(leaky.model_copy(update={"base_model": leaky.base_model.model_copy(
        update={"path": "some/checkpoint"})}))
