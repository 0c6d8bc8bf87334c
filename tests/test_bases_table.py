"""docs/bases.md's generated block (`benchmarks.tables.bases_table`): one row per base whose
premises were measured, read from premises.json records in a repository layout under tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import tables
from core.params import ROOT


def _record(**extra) -> dict:
    record = {"premise/token_entropy": 0.0634, "premise/self_certainty_auroc": 0.54268,
              "premise/pass@1": 0.3678125, "premise/pass@16": 0.96, "premise/maj@16": 0.59,
              "holds/confidence_tracks_correctness": False, "holds/latent_skill": True,
              "holds/leak_memorised": None, "holds/majority_beats_sample": True,
              "holds/room_to_sharpen": False, "premise/k": 16, "task": "arith"}
    return {**record, **extra}


def _write(path: Path, record) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record if isinstance(record, str) else json.dumps(record))


def _repo(tmp_path: Path) -> Path:
    """The default study's record, a leaked study's and a study measured before the premises stage."""
    _write(tmp_path / "data/eval/base/premises.json", _record())
    _write(tmp_path / "studies/leaked/data/eval/base/premises.json",
           _record(**{"premise/self_certainty_auroc": None, "premise/pass@1_leaked": 0.8125,
                      "premise/pass@1_clean": 0.25, "holds/leak_memorised": True}))
    (tmp_path / "studies/hint_copier/data/eval/base").mkdir(parents=True)
    (tmp_path / "studies/README.md").write_text("not a study")
    return tmp_path


def test_one_row_per_measured_base_default_first_then_studies(tmp_path) -> None:
    block = tables.bases_table(_repo(tmp_path))
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| base")]
    assert rows == [
        "| sharp (default) | 0.063 | 0.543 | 0.368 | 0.960 | 0.590 | — | "
        "`latent_skill`, `majority_beats_sample` | `confidence_tracks_correctness`, `room_to_sharpen` |",
        "| leaked | 0.063 | — | 0.368 | 0.960 | 0.590 | 0.812 / 0.250 | "
        "`latent_skill`, `majority_beats_sample`, `leak_memorised` | "
        "`confidence_tracks_correctness`, `room_to_sharpen` |",
    ]
    assert "| base | token entropy (nat) | self-certainty AUROC | pass@1 | pass@16 | maj@16 |" in block
    # The study without a record is named below the table, once; README.md is no study.
    assert block.splitlines()[-1] == "Not measured yet: hint_copier."
    assert "README" not in block


def test_the_studies_are_sorted_and_an_unmeasured_default_is_named(tmp_path) -> None:
    for study in ("zeta", "alpha"):
        _write(tmp_path / f"studies/{study}/data/eval/base/premises.json", _record())
    block = tables.bases_table(tmp_path)
    assert block.index("| alpha |") < block.index("| zeta |")
    assert "| sharp (default) |" not in block
    assert block.splitlines()[-1] == "Not measured yet: sharp (default)."


def test_nothing_measured_says_so(tmp_path) -> None:
    (tmp_path / "studies/a").mkdir(parents=True)
    block = tables.bases_table(tmp_path)
    assert block.startswith("_No base's premises are measured yet")
    assert "|" not in block and block.endswith("Not measured yet: sharp (default), a.")


@pytest.mark.parametrize("content, why", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({k: v for k, v in _record().items() if k != "premise/maj@16"}), "'premise/maj@16'"),
    (json.dumps(_record(**{"premise/pass@1": "0.3"})), "'premise/pass@1'"),
    (json.dumps(_record(**{"holds/latent_skill": "yes"})), "'holds/latent_skill'"),
])
def test_a_malformed_record_raises_one_line_naming_the_file(tmp_path, content, why) -> None:
    _repo(tmp_path)
    _write(tmp_path / "studies/broken/data/eval/base/premises.json", content)
    with pytest.raises(ValueError) as err:
        tables.bases_table(tmp_path)
    message = str(err.value)
    assert message.startswith("studies/broken/data/eval/base/premises.json: malformed premises record")
    assert why in message and "\n" not in message


def test_docs_bases_holds_the_block_and_renders_stably() -> None:
    page_path = ROOT / "docs" / "bases.md"
    assert page_path in tables.PAGES  # `python -m benchmarks.tables` (make results) renders it
    page = page_path.read_text(encoding="utf-8")
    begin, end = "<!-- bases:begin (python -m benchmarks.tables) -->", "<!-- bases:end -->"
    assert page.count(begin) == 1 and page.count(end) == 1 and page.index(begin) < page.index(end)
    once = tables.render(page)
    assert tables.render(once) == once
    assert once.split(begin)[1].split(end)[0].strip() == tables.bases_table().strip()


def test_the_arms_on_each_measured_base_against_its_own_evaluation(tmp_path) -> None:
    root = _repo(tmp_path)
    study = root / "studies" / "latent" / "data" / "eval"
    _write(study / "base" / "premises.json", _record())
    _write(study / "base" / "metrics.json", {"arith/pass@1": 0.25})
    _write(study / "format" / "seed0" / "metrics.json", {"arith/pass@1": 0.75})
    _write(study / "format" / "seed1" / "metrics.json", {"arith/pass@1": 0.5})
    _write(study / "random" / "seed0" / "metrics.json", {"facts/coverage": 0.5})  # no arith: left out
    # a study whose base's premises are not measured is not an engineered base's row
    _write(root / "studies" / "old" / "data" / "eval" / "rlvr" / "seed0" / "metrics.json",
           {"arith/pass@1": 0.9})
    lines = tables.base_arms_table(root).splitlines()
    assert lines[0] == "| base | arm | arith/pass@1 by seed | mean | the base's | mean − base |"
    assert lines[2] == "| latent | `format` | 0.750 (seed 0), 0.500 (seed 1) | 0.625 | 0.250 | +0.375 |"
    assert not any("`random`" in line or line.startswith("| old") for line in lines)
    assert len([line for line in lines if line.startswith("| latent")]) == 1
    assert tables.base_arms_table(tmp_path / "empty") == "_No arm has trained on an engineered base yet._"
