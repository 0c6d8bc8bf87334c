"""A claim's premise (evals/claims.yaml `premise`): read from the base's premises record
(data/eval/base/premises.json) on each base the claim is decided on. Failed there: the claim is
not tested on that base, the measured value in the reason; held or not measured: decided as
without it, the status shown per base (reports/claims.json, the report's and README's tables)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.io import DataError
from evals import claims as cl
from evals.premises import PREMISES, VERSION, verdicts
from flows import report as rep
from flows.report_claims import claims_markdown, premise_readme
from flows.report_collect import collect
from flows.report_readme import claims_readme
from tests.test_claims import KEY, arms, items_world, judge, own, write, write_base

AUROC = "premise/self_certainty_auroc"
NAME = "confidence_tracks_correctness"


def premised(premise: str = NAME) -> cl.Claim:
    """`t` beats `c` by 0.1 (the default study's arms: its premise is read on `base`)."""
    return cl.Claim("x", "000", "Fig. 0", "t beats c", (("t", "c"),), KEY, "greater",
                    min_effect=0.1, premise=premise)


def write_premises(data: Path, record=None, **measures) -> None:
    """The base's premises record as the premises stage writes it: the measures, `holds/<name>`
    of each premise and the version (`record`: written as is)."""
    if record is None:
        record = {**measures, **verdicts(measures), "version": VERSION}
    write(data / "eval" / "base" / "premises.json", record)


def world(data: Path, measures: dict | None = None, seed: int = 0) -> None:
    """Arms t and c (t 0.3 above c), the base evaluated, its premises where given."""
    t, c = items_world(shift=0.3, seeds=3, seed=seed)
    arms(data, t, c)
    write_base(data, np.full(20, 0.3))
    if measures:
        write_premises(data, **measures)


def premise(v: cl.Verdict) -> dict:
    """The claim's premise as reports/claims.json records it (the claim has one)."""
    record = cl.premise_json(v)
    assert record is not None
    return record


def test_a_failed_premise_makes_the_claim_not_tested_with_its_measured_value(tmp_path) -> None:
    world(tmp_path, {AUROC: 0.5432})
    [v], notes = judge(tmp_path, premised())
    assert v.verdict == cl.NOT_TESTED and not notes
    assert v.reason == f"premise {NAME} fails on this base: self-certainty AUROC 0.543 < 0.70"
    # The comparison is still computed (the table shows it), but no seed more is planned for it.
    assert v.comparisons[0].verdict == cl.REPRODUCED
    assert cl.seed_plan([v]) == {"t": 0, "c": 0}
    record = premise(v)
    assert record["first_base"] == {"status": cl.FAILS, "value": 0.5432,
                                    "text": "self-certainty AUROC 0.543 < 0.70"}
    assert record["threshold"] == PREMISES[NAME].threshold and record["bases"] == ["base"]


def test_a_premise_that_holds_decides_the_claim_as_without_it(tmp_path) -> None:
    world(tmp_path, {AUROC: 0.81})
    [v], _ = judge(tmp_path, premised())
    [without], _ = judge(tmp_path, premised(""))
    assert v.verdict == without.verdict == cl.REPRODUCED and v.reason == without.reason
    assert v.comparisons == without.comparisons
    assert premise(v)["first_base"]["text"] == "self-certainty AUROC 0.810 ≥ 0.70"
    assert cl.premise_json(without) is None


def test_a_premise_not_measured_decides_the_claim_and_says_so(tmp_path) -> None:
    world(tmp_path)  # no premises.json
    [v], notes = judge(tmp_path, premised())
    assert v.verdict == cl.REPRODUCED and not notes and v.preconditions == ()
    assert premise(v)["first_base"]["status"] == cl.NOT_MEASURED
    # Measured, but another premise's measure missing (its AUROC undefined: one class only).
    write_premises(tmp_path, **{AUROC: None, "premise/token_entropy": 0.05})
    [v], notes = judge(tmp_path, premised())
    assert v.verdict == cl.REPRODUCED and not notes
    assert premise(v)["first_base"]["status"] == cl.NOT_MEASURED


def two_bases(tmp_path: Path, first: float, second: float, second_arms: bool = True):
    """The default study and its second base (studies/default.seed1/), each base's AUROC given."""
    data = tmp_path / "data"
    world(data, {AUROC: first})
    other = tmp_path / "studies" / "default.seed1" / "data"
    if second_arms:
        world(other, {AUROC: second}, seed=1)
    else:
        write_base(other, np.full(20, 0.3))
        write_premises(other, **{AUROC: second})
    runs = rep.with_studies(collect(data), data).runs
    [v], notes = cl.verdicts(runs, (premised(),))
    return v, notes


def test_failing_on_both_bases_the_headline_is_not_tested(tmp_path) -> None:
    v, notes = two_bases(tmp_path, 0.55, 0.61)
    assert v.verdict == cl.NOT_TESTED and own(v) == cl.NOT_TESTED and not notes
    assert v.second["verdict"] == cl.NOT_TESTED and v.second["agrees"] is True
    assert v.reason == (f"premise {NAME} fails on both bases: self-certainty AUROC 0.550 < 0.70 "
                        "(first), self-certainty AUROC 0.610 < 0.70 (second)")
    assert v.first["reason"].startswith(f"premise {NAME} fails on this base")
    assert premise(v)["second_base"]["text"] == "self-certainty AUROC 0.610 < 0.70"


def test_a_premise_failed_on_the_second_base_needs_no_run_there(tmp_path) -> None:
    """Read from that base's premises record alone: not tested there before any arm trains, and
    its pilot is not asked for."""
    v, _ = two_bases(tmp_path, 0.55, 0.61, second_arms=False)
    assert v.second["verdict"] == cl.NOT_TESTED and v.second["short_of_pilot"] == []
    assert v.verdict == cl.NOT_TESTED
    assert not rep.runs_needed([v])
    assert rep.second_base_cell(v)[:2] == [
        cl.NOT_TESTED, f"premise {NAME} fails (self-certainty AUROC 0.610 < 0.70)"]


def test_failing_on_one_base_only_the_family_rule_gives_inconclusive(tmp_path) -> None:
    # First base fails, second holds (and reproduces): the bases differ, so the headline is
    # inconclusive (evals/claims.yaml `family: bases: agree`), the first base's own kept.
    v, _ = two_bases(tmp_path / "a", 0.55, 0.9)
    assert own(v) == cl.NOT_TESTED and v.second["verdict"] == cl.REPRODUCED
    assert v.verdict == cl.INCONCLUSIVE and v.second["agrees"] is False
    assert v.reason.startswith("first base not tested, second base reproduced: a headline verdict "
                               f"needs both bases to agree (first base: premise {NAME} fails on "
                               "this base: self-certainty AUROC 0.550 < 0.70)")
    # The other way round: the same.
    w, _ = two_bases(tmp_path / "b", 0.9, 0.55)
    assert own(w) == cl.REPRODUCED and w.second["verdict"] == cl.NOT_TESTED
    assert w.verdict == cl.INCONCLUSIVE
    # The first base fails and the second is not built yet: undecided there, so inconclusive.
    data = tmp_path / "c" / "data"
    world(data, {AUROC: 0.55})
    [u], _ = cl.verdicts(collect(data).runs, (premised(),))
    assert own(u) == cl.NOT_TESTED and u.second["verdict"] == cl.NOT_RUN and u.verdict == cl.INCONCLUSIVE


@pytest.mark.parametrize("record, note", [
    ({AUROC: 0.5, f"holds/{NAME}": "no", "version": VERSION},
     f"holds/{NAME} is 'no', not true, false or null"),
    ({AUROC: "low", "version": VERSION}, f"{AUROC} is 'low', not a finite number"),
    ({AUROC: 0.5, "version": "0"}, f"measured by version 0 of evals/premises.py, the code is {VERSION}"),
    ({f"holds/{NAME}": False, "version": VERSION}, f"holds/{NAME} is false but {AUROC} is missing"),
])
def test_a_malformed_premises_record_is_a_note_not_a_crash(tmp_path, record, note) -> None:
    world(tmp_path)
    write_premises(tmp_path, record)
    [v, _], notes = cl.verdicts(collect(tmp_path).runs, (premised(), premised()))
    assert v.verdict == cl.INCONCLUSIVE and own(v) == cl.REPRODUCED  # decided, as not measured
    assert premise(v)["first_base"]["status"] == cl.NOT_MEASURED
    [line] = [n for n in notes if "premises.json" in n]  # once, for every claim and base reading it
    assert line.startswith("data/eval/base/premises.json: " + note)
    assert line.endswith(f"; premise {NAME} taken as not measured")


def test_a_premises_file_that_is_not_an_object_is_a_collect_note(tmp_path) -> None:
    world(tmp_path)
    write(tmp_path / "eval" / "base" / "premises.json", [0.5])
    found = collect(tmp_path)
    assert found.runs["base"][None].premises is None
    assert [n for n in found.notes if "premises.json" in n] == [
        f"{tmp_path}/eval/base/premises.json: expected a JSON dict, got list; ignored"]
    [v], notes = judge(tmp_path, premised())
    assert v.verdict == cl.REPRODUCED and not notes
    # One handed to the claims directly (not through `collect`): noted there.
    runs = collect(tmp_path).runs
    runs["base"][None].premises = [0.5]  # type: ignore[assignment]
    [v], notes = cl.verdicts(runs, (premised(),), second=None)
    assert v.verdict == cl.REPRODUCED
    assert notes == ["data/eval/base/premises.json: expected a JSON object, got list; premise "
                     f"{NAME} taken as not measured"]


def test_a_recorded_verdict_that_disagrees_with_its_measure_is_noted(tmp_path) -> None:
    """The measure is read against today's threshold; a record whose `holds/<name>` says
    otherwise (measured under another threshold) is named in the notes."""
    world(tmp_path)
    write_premises(tmp_path, {AUROC: 0.6, f"holds/{NAME}": True, "version": VERSION})
    [v], notes = judge(tmp_path, premised())
    assert v.verdict == cl.NOT_TESTED
    assert notes == [f"data/eval/base/premises.json: holds/{NAME} is true, but self-certainty AUROC "
                     "0.600 against today's threshold 0.70 says otherwise; the measure is read"]


def test_an_unknown_premise_fails_at_load_in_one_line(tmp_path) -> None:
    bad = tmp_path / "claims.yaml"
    bad.write_text("claims:\n- {id: x, paper: '000', figure: Fig. 1, statement: s, comparisons: [[a, b]],"
                   " metric: m, kind: greater, premise: sharpness}\n")
    with pytest.raises(DataError) as e:
        cl.load_claims(bad)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{bad}: claim x: premise 'sharpness' is not one of ")
    assert ", ".join(PREMISES) in message
    bad.write_text(bad.read_text().replace("premise: sharpness", "premise: [a]"))
    with pytest.raises(DataError, match="claim x: premise"):
        cl.load_claims(bad)


def test_the_declared_claims_name_their_premises() -> None:
    declared = {c.id: c.premise for c in cl.CLAIMS if c.premise}
    assert declared == {"self_certainty_tracks_rlvr": "confidence_tracks_correctness",
                        "entropy_improves_on_base": "room_to_sharpen",
                        "ttrl_beats_base_majority": "majority_beats_sample",
                        "spurious_rewards_no_gain": "latent_skill",
                        "intrinsic_rewards_collapse": "room_to_sharpen",
                        # the same claims on the bases engineered to hold them (docs/bases.md)
                        "ttrl_beats_base_majority_calibrated": "majority_beats_sample",
                        "self_certainty_tracks_rlvr_calibrated": "confidence_tracks_correctness",
                        "entropy_improves_on_calibrated_base": "room_to_sharpen",
                        "spurious_rewards_gain_with_latent_skill": "latent_skill",
                        "spurious_rewards_gain_with_leak": "leak_memorised",
                        "intrinsic_rewards_collapse_calibrated": "room_to_sharpen"}
    # Each engineered base's claims read its own study's arms.
    for c in cl.CLAIMS:
        if c.premise and c.id.endswith(("_calibrated", "_calibrated_base", "_latent_skill",
                                        "_with_leak")):
            study = {"latent_skill": "latent", "leak_memorised": "leaked"}.get(c.premise, "calibrated")
            assert all(str(a).startswith(f"{study}/") for comp in c.comparisons
                       for a in (comp.treatment, comp.control)), c.id
    # On the second base the premise is read on that study's base.
    [collapse] = [c for c in cl.CLAIMS if c.id == "intrinsic_rewards_collapse"]
    assert cl.on_second_base(collapse).premise == "room_to_sharpen"


def test_the_report_shows_the_premise_per_base(tmp_path) -> None:
    world(tmp_path, {AUROC: 0.5432})
    found, notes = judge(tmp_path, premised(), premised(""))
    record = cl.claims_json(found, notes)["claims"]
    assert record[0]["premise"]["name"] == NAME and record[0]["premise"]["first_base"]["status"] == cl.FAILS
    assert record[1]["premise"] is None
    json.dumps(record)  # serialisable as it stands
    table = claims_markdown(found, notes)
    # In the claim's cell, under its setting: a column of its own squeezed the verdict's.
    assert "| seeds | second base | verdict |" in table
    assert (f"; premise: {NAME}; first base: fails, self-certainty AUROC 0.543 < 0.70; second base: "
            "not measured |") in table and "| not run | **not tested**: premise" in table
    # The failed premise is in the claim's cell, not again among the verdict's preconditions.
    assert "precondition fails: premise" not in table
    html_page = rep.claims_html(found, notes)
    assert "first base: fails, self-certainty AUROC 0.543 &lt; 0.70" in html_page
    assert premise_readme(found[0]) == "✗ 0.54 < 0.70" and premise_readme(found[1]) == ""


def test_the_readme_claims_block_has_a_compact_premise_column(tmp_path) -> None:
    data = tmp_path / "data"
    world(data, {AUROC: 0.5432, "premise/token_entropy": 0.81})
    text = claims_readme(rep.with_studies(collect(data), data))
    lines = text.splitlines()
    assert lines[0] == "| claim | paper | difference [95% CI] | verdict | second base | premise |"
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines[2:] if line.startswith("| `")}
    assert rows["`self_certainty_tracks_rlvr`"].endswith("| ✗ 0.54 < 0.70 |")
    assert rows["`entropy_improves_on_base`"].endswith("| ✓ 0.81 |")
    assert rows["`ttrl_beats_base_majority`"].endswith("| not measured |")
    # No premise: its cell left out (a short row reads as an empty cell), 3 bytes less a row.
    assert rows["`rlme_tracks_rlvr`"].count(" | ") == 4
    # intrinsic_rewards_collapse reads the intrinsic_long study's base, not measured here.
    assert rows["`intrinsic_rewards_collapse`"].endswith("| not measured |")


def test_a_study_on_the_committed_base_reads_that_bases_premises() -> None:
    """intrinsic_long trains on the default base (its preset leaves the base's inputs alone): its
    base has no premises record of its own, and reads the one measured on the same weights (by
    md5); a base with other weights does not."""
    from types import SimpleNamespace

    from evals.claims_runs import _premise_on

    measured = {AUROC: 0.5432}
    record = {**measured, **verdicts(measured), "version": VERSION}
    runs = {"base": {None: SimpleNamespace(base="md5:aa", premises=record)},
            "long/base": {None: SimpleNamespace(base="md5:aa", premises=None)},
            "other/base": {None: SimpleNamespace(base="md5:bb", premises=None)}}
    notes: list[str] = []
    assert _premise_on(runs, "long/base", NAME, notes) == (cl.FAILS, 0.5432)
    assert _premise_on(runs, "other/base", NAME, notes) == (cl.NOT_MEASURED, None)
    unrecorded = {**runs, "base": {None: SimpleNamespace(base="", premises=record)},
                  "long/base": {None: SimpleNamespace(base="", premises=None)}}
    assert _premise_on(unrecorded, "long/base", NAME, notes)[0] == cl.NOT_MEASURED and not notes
