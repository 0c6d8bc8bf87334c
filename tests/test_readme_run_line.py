"""The README's `make run` line says what a fresh clone trains again (flows/report_readme.py,
`fresh_clone_text`): weights in git, a DVC remote to pull them from, or neither. Checked on a
small git repository per case, without a dvc.lock (no outdated-run clause)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core.params import load
from flows.report_readme import dvc_remotes, fresh_clone_text

ROOT = Path(__file__).resolve().parents[1]


def _repo(tmp_path: Path, tracked: list[str] = (), config: str | None = None) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for rel in tracked:
        f = tmp_path / rel / "model.safetensors"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"w")
    if config is not None:
        (tmp_path / ".dvc").mkdir()
        (tmp_path / ".dvc" / "config").write_text(config, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    return tmp_path


@pytest.fixture(scope="module")
def params():
    return load(ROOT / "params.yaml")


def test_neither_git_nor_a_remote_ships_the_weights(tmp_path, params) -> None:
    root = _repo(tmp_path)
    text = fresh_clone_text(root, params, ["rlvr", "rlme"], [0])
    assert text.startswith("A fresh clone trains all 2 again: no checkpoint ships")
    assert "names no remote" in text and text.endswith(".")


def test_some_weights_in_git(tmp_path, params) -> None:
    root = _repo(tmp_path, ["data/checkpoints/rlvr/seed0/final"])
    text = fresh_clone_text(root, params, ["rlvr", "rlme"], [0])
    assert text.startswith("A fresh clone trains 1 again")  # not "all"


def test_every_weight_in_git(tmp_path, params) -> None:
    root = _repo(tmp_path, ["data/checkpoints/rlvr/seed0/final"])
    assert fresh_clone_text(root, params, ["rlvr"], [0]) == (
        "A fresh clone has their weights in git and trains none again.")


def test_a_remote_in_the_committed_dvc_config(tmp_path, params) -> None:
    # As `dvc remote add -d store s3://bucket/lab` writes it: the section name single-quoted.
    root = _repo(tmp_path, config="[core]\n    remote = store\n['remote \"store\"']\n"
                                  "    url = s3://bucket/lab\n")
    assert dvc_remotes(root) == ["store"]
    text = fresh_clone_text(root, params, ["rlvr", "rlme"], [0, 1])
    assert text.startswith("A fresh clone pulls the weights of 4 with `dvc pull` (remote `store`)")


def test_a_malformed_dvc_config_names_no_remote(tmp_path, params) -> None:
    root = _repo(tmp_path, config="this is [not an ini\n")
    assert dvc_remotes(root) == []
    assert "names no remote" in fresh_clone_text(root, params, ["rlvr"], [0])
