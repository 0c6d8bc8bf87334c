"""`make revalidate` (flows/revalidate.py): which files really changed, which records are candidates,
and how dvc.lock is re-stamped. The canaries' end-to-end run trains for minutes and is exercised by
`make revalidate` itself (its evidence: reports/revalidate.json)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flows import revalidate as rv


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "same.py").write_text('"""Doc."""\n\ndef f(x):\n    return x + 1  # one\n')
    (tmp_path / "real.py").write_text("def g(x):\n    return x * 2\n")
    (tmp_path / "gone.py").write_text("A = 1\n")
    (tmp_path / "notes.txt").write_text("a\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def test_only_files_whose_code_changed_count_not_comments_docstrings_or_layout(repo: Path) -> None:
    since = _git(repo, "rev-parse", "HEAD")
    (repo / "same.py").write_text('"""Another docstring,\nlonger."""\n\n\ndef f(x):\n    # why\n    return x + 1\n')
    (repo / "real.py").write_text("def g(x):\n    return x * 3\n")
    (repo / "gone.py").unlink()
    (repo / "new.py").write_text("B = 2\n")
    (repo / "notes.txt").write_text("b\n")
    # the working tree (head None) first: a dry run sees uncommitted edits; new.py is untracked
    assert rv.changed_code(since, None, root=repo) == ["gone.py", "real.py"]
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "two")
    assert rv.changed_code(since, "HEAD", root=repo) == ["gone.py", "new.py", "real.py"]


def test_a_file_that_no_longer_parses_counts_as_changed(repo: Path) -> None:
    since = _git(repo, "rev-parse", "HEAD")
    (repo / "same.py").write_text("def f(x:\n")
    assert rv.changed_code(since, None, root=repo) == ["same.py"]


def test_an_unknown_commit_is_a_one_line_error(repo: Path) -> None:
    with pytest.raises(rv.RevalidateError, match="git diff"):
        rv.changed_code("no-such-rev", None, root=repo)


def _cfg(code: str, lr: float = 1e-3) -> dict:
    return {"code": code, "lr": lr}


def test_classify_keeps_only_records_current_at_since_whose_code_digest_alone_moved() -> None:
    f = "data/runs/m/train.json"
    since = {f: {"config": _cfg("old")}, "data/runs/s/train.json": {"config": _cfg("old")},
             "data/runs/o/train.json": {"config": _cfg("old")}, "data/runs/c/train.json": {"config": _cfg("new")}}
    head = {f: {"config": _cfg("new"), "closure": ["a.py", "b.py"]},
            "data/runs/s/train.json": {"config": _cfg("new", lr=2e-3)},
            "data/runs/o/train.json": {"config": _cfg("new")},
            "data/runs/c/train.json": {"config": _cfg("new")}}
    stages = [rv.Stage("train@m-0", f, lock_md5=rv.md5(_cfg("old"))),
              rv.Stage("train@s-0", "data/runs/s/train.json", lock_md5=rv.md5(_cfg("old"))),
              rv.Stage("train@o-0", "data/runs/o/train.json", lock_md5=rv.md5(_cfg("older"))),
              rv.Stage("train@c-0", "data/runs/c/train.json", lock_md5=rv.md5(_cfg("new"))),
              rv.Stage("train@x-0", "data/runs/x/train.json", lock_md5="0")]
    rv.classify(stages, since, head, changed=["b.py", "c.py"])
    assert [s.verdict for s in stages] == ["candidate", "settings", "outdated", "current", "unknown"]
    assert stages[0].changed == ["b.py"]  # only the changed files the run imports


def test_lock_stages_and_restamp_touch_only_the_run_file_entries(tmp_path: Path) -> None:
    lock = tmp_path / "dvc.lock"
    lock.write_text(
        "schema: '2.0'\nstages:\n"
        "  train@m-0:\n    cmd: x\n    deps:\n"
        "    - path: data/runs/m/train.json\n      hash: md5\n      md5: aaa\n      size: 10\n"
        "    - path: data/base_model\n      hash: md5\n      md5: bbb\n      size: 20\n"
        "  prepare:\n    cmd: y\n    deps:\n    - path: data/runs/m/train.json\n      md5: ccc\n      size: 1\n")
    stages = rv.lock_stages(lock)
    assert [(s.name, s.run_file, s.lock_md5) for s in stages] == [("train@m-0", "data/runs/m/train.json", "aaa")]
    assert rv.restamp(lock, {"train@m-0": ("fff", 42)}) == 1
    text = lock.read_text()
    assert "md5: fff\n      size: 42\n" in text
    assert "md5: bbb\n      size: 20" in text and "md5: ccc\n      size: 1" in text
    assert rv.lock_stages(lock)[0].lock_md5 == "fff"


def test_run_of_names_the_method_and_seed_of_a_stage() -> None:
    assert rv.run_of("train@r3_gate-3") == ("r3_gate", 3)
    assert rv.run_of("evaluate_base") == ("base", None)


def _record(root: Path, train: list[dict], metrics: dict, run: dict | None = None) -> Path:
    """One run's files (method m, seed 0) under `root`, as `compare` reads them."""
    import json

    ev, plots = root / "data/eval/m/seed0", root / "data/plots/m/seed0"
    ev.mkdir(parents=True)
    plots.mkdir(parents=True)
    (ev / "metrics.json").write_text(json.dumps(metrics))
    (ev / "items.json").write_text(json.dumps({"t": {"ids": [1, 2], "metrics": {"c": [1, 0]}}}))
    (plots / "train.json").write_text(json.dumps(train))
    if run is not None:
        (root / "data/checkpoints/m/seed0").mkdir(parents=True)
        (root / "data/checkpoints/m/seed0/run.json").write_text(json.dumps(run))
    return root


OLD_CURVE = [{"step": 1, "reward": 0.25, "entropy": 1.5}, {"step": 2, "reward": 0.5, "entropy": 1.25}]
NEW_KEYS = {"urlvr/reward_accuracy": 0.75, "urlvr/point_biserial": 0.5}


def test_a_rerun_that_adds_measures_still_matches_and_lists_them(tmp_path: Path) -> None:
    rec = _record(tmp_path / "rec", OLD_CURVE, {"t/pass@1": 0.5}, {"best_step": 2})
    new = _record(tmp_path / "new", [{**row, **NEW_KEYS} for row in OLD_CURVE],
                  {"t/pass@1": 0.5, "t/urlvr": 0.1}, {"best_step": 2, "mcs": 7})
    r = rv.compare(rec, new, "m", 0)
    assert r["matches"], r
    assert r["curve_keys_added"] == ["train:urlvr/point_biserial", "train:urlvr/reward_accuracy"]
    assert r["metrics_added"] == ["t/urlvr", "run.json:mcs"]
    assert r["metrics_differing"] == {} and r["curve_max_abs_diff"] == {}


def test_a_rerun_that_loses_or_changes_a_recorded_value_still_fails(tmp_path: Path) -> None:
    rec = _record(tmp_path / "rec", [{**row, **NEW_KEYS} for row in OLD_CURVE], {"t/pass@1": 0.5, "t/x": 1})
    lost = _record(tmp_path / "lost", OLD_CURVE, {"t/pass@1": 0.5})
    r = rv.compare(rec, lost, "m", 0)
    assert not r["matches"] and r["curve_keys_added"] == [] and r["metrics_added"] == []
    assert r["curve_max_abs_diff"]["train:urlvr/reward_accuracy"] == float("inf")
    assert r["metrics_differing"] == {"t/x": [1.0, None]}
    # An added measure does not hide a change to an old value beside it.
    changed = [{**OLD_CURVE[0], **NEW_KEYS}, {**OLD_CURVE[1], "entropy": 1.0, **NEW_KEYS}]
    r = rv.compare(_record(tmp_path / "rec2", OLD_CURVE, {"t/pass@1": 0.5}),
                   _record(tmp_path / "changed", changed, {"t/pass@1": 0.5}), "m", 0)
    assert not r["matches"] and r["curve_max_abs_diff"] == {"train:entropy": 0.25}
    assert r["curve_keys_added"] == ["train:urlvr/point_biserial", "train:urlvr/reward_accuracy"]


def test_a_value_where_the_recorded_curve_has_none_at_that_row_is_a_difference(tmp_path: Path) -> None:
    """A key the record holds in some rows is compared in every row: the rerun logging it at a
    step where the record did not is a changed run, not an added measure."""
    sparse = [{**OLD_CURVE[0], "urlvr/reward_accuracy": 0.75}, OLD_CURVE[1]]
    dense = [{**row, "urlvr/reward_accuracy": 0.75} for row in OLD_CURVE]
    r = rv.compare(_record(tmp_path / "rec", sparse, {}), _record(tmp_path / "new", dense, {}), "m", 0)
    assert not r["matches"] and r["curve_keys_added"] == []
    assert r["curve_max_abs_diff"] == {"train:urlvr/reward_accuracy": float("inf")}
