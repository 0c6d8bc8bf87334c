"""What `make clean` removes, and where a re-run writes its times: nothing tracked by git is
removed or rewritten.

`make clean` once ran `rm -rf data/base_model data/checkpoints data/eval data/plots reports`:
the shipped base of record and some 700 tracked results went with it. It is now `git clean -X`
on the rebuildable outputs' folders (the Makefile's `CLEAN_PATHS`): checked here against
`git ls-files` as `make -n clean` prints it, and run in a scratch repository built from the
repository's own Makefile and ignore files.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from core.params import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                                reason="needs make and git")


def _run(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def clean_commands(cwd: Path = ROOT) -> list[list[str]]:
    """The shell commands `make -n clean` would run, each split into words (pipes kept apart)."""
    out = []
    for line in _run(["make", "-n", "clean"], cwd).replace("\\\n", " ").splitlines():
        words = shlex.split(line)
        while words:
            cut = next((i for i, w in enumerate(words) if w in ("|", "||", "&&", ";")), len(words))
            out.append(words[:cut])
            words = words[cut + 1:]
    return [c for c in out if c]


def removal_targets(commands: list[list[str]]) -> list[str]:
    """The paths the removing commands name, and a problem line for any command that would
    remove a tracked file by its nature (`rm`, `git clean` without -X, i.e. untracked or not)."""
    targets, problems = [], []
    for words in commands:
        if words[:2] == ["git", "clean"]:
            flags = "".join(w[1:] for w in words[2:] if w.startswith("-") and not w.startswith("--"))
            if "X" not in flags or "x" in flags:
                problems.append(f"{shlex.join(words)}: `git clean` removes ignored files only with -X")
            targets += words[words.index("--") + 1:] if "--" in words else []
        elif words[0] in ("rm", "rmdir", "find", "unlink", "shred"):
            problems.append(f"{shlex.join(words)}: removes by name, tracked or not")
            targets += [w for w in words[1:] if not w.startswith("-")]
    assert not problems, "\n".join(problems)
    return targets


def test_make_clean_removes_no_tracked_file_here() -> None:
    """As the issue asked: `make -n clean` against `git ls-files`. Every removing command is
    `git clean -X` (ignored files only), and what it would remove here is none of git's."""
    targets = removal_targets(clean_commands())
    assert {"data/checkpoints", "data/prepared", "reports"} <= set(targets), targets
    for kept in ("data/external", "mlflow", ".studies", "studies", "data/base_model"):
        assert not any(kept == t or kept.startswith(t.rstrip("/") + "/") for t in targets), kept
    tracked = set(_run(["git", "ls-files", "-z"], ROOT).split("\0")) - {""}
    listed = _run(["git", "clean", "-ndX", "--", *targets], ROOT)
    for line in listed.splitlines():
        path = line.removeprefix("Would remove ").rstrip("/")
        assert path not in tracked and not any(t.startswith(path + "/") for t in tracked), line


def test_a_command_that_removes_tracked_files_is_caught() -> None:
    """The check above can fail: the old recipe, and a `git clean` that takes untracked files."""
    with pytest.raises(AssertionError, match="removes by name"):
        removal_targets([["rm", "-rf", "data/base_model", "reports"]])
    with pytest.raises(AssertionError, match="ignored files only"):
        removal_targets([["git", "clean", "-fdx", "--", "data"]])


def scratch_repo(tmp_path: Path) -> Path:
    """A git repository with the Makefile and ignore files of this one, tracked results of
    record and ignored outputs at the places the stages write them."""
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", repo / "Makefile")
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    shutil.copy(ROOT / "data" / ".gitignore", repo / "data" / ".gitignore")
    files = {
        # in git
        "data/base_model/model.safetensors": "weights of record",
        "data/base_model_info.json": "{}",
        "data/checkpoints/rlvr/seed0/run.json": "{}",
        "data/eval/rlvr/seed0/metrics.json": "{}",
        "data/plots/rlvr/seed0/train.json": "[]",
        "data/components/rlvrr.jsonl": "{}",
        "data/external/README.md": "put files here",
        "reports/summary.md": "summary",
        "reports/times/quick.json": "{}",
        # ignored, rebuilt by the stages
        "data/prepared/arith/train.jsonl": "{}",
        "data/runs/rlvr/train.json": "{}",
        "data/work/sft/phase1/stamp": "x",
        "data/checkpoints/rlvr/seed0/final/model.safetensors": "w",
        "data/checkpoints/rlvr/seed0/checkpoint-10/optimizer.pt": "o",
        "data/checkpoints/rlvr/seed0/.best/v1/model.safetensors": "b",
        "reports/index.html": "<html>",
        "reports/last_run/quick.json": "{}",
        # ignored, never make clean's
        "data/external/my_gsm8k.jsonl": "mine",
        "mlflow/mlflow.db": "history",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    _run(["git", "init", "-q"], repo)
    _run(["git", "add", "-A"], repo)
    _run(["git", *env, "commit", "-qm", "init"], repo)
    return repo


def test_make_clean_keeps_every_tracked_file_and_says_what_it_removes(tmp_path) -> None:
    repo = scratch_repo(tmp_path)
    tracked = _run(["git", "ls-files"], repo).split()
    assert "data/base_model/model.safetensors" in tracked and "reports/index.html" not in tracked
    said = _run(["make", "clean"], repo)
    assert "make clean: removing data/prepared/" in said, said
    assert "make clean: removing reports/index.html" in said, said
    assert all((repo / t).exists() for t in tracked), [t for t in tracked if not (repo / t).exists()]
    assert _run(["git", "status", "--porcelain"], repo) == ""
    for gone in ("data/prepared", "data/runs", "data/work", "data/checkpoints/rlvr/seed0/final",
                 "data/checkpoints/rlvr/seed0/checkpoint-10", "data/checkpoints/rlvr/seed0/.best",
                 "reports/index.html", "reports/last_run"):
        assert not (repo / gone).exists(), gone
    assert (repo / "data/external/my_gsm8k.jsonl").exists() and (repo / "mlflow/mlflow.db").exists()
    assert "nothing to remove" in _run(["make", "clean"], repo)


def test_a_rerun_writes_its_times_where_git_does_not_look() -> None:
    """`make run` and `make study` write their stage times to reports/last_run/ (ignored); only
    `--record-times` writes the committed reports/times/; a study's workspace writes last_run too."""
    from flows.pipeline_schedule import times_path
    from tasks.studies import TIMES_FILE

    quick, study = times_path(True, False), times_path(False, False)
    assert quick is not None and study is not None
    ignored = [str(p.relative_to(ROOT)) for p in (quick, study)] + [str(TIMES_FILE)]
    check = subprocess.run(["git", "check-ignore", *ignored], cwd=ROOT, capture_output=True, text=True)
    assert check.stdout.split() == ignored, check.stdout
    record = times_path(True, False, record=True)
    assert record is not None and record.relative_to(ROOT).parts[:2] == ("reports", "times")
    assert subprocess.run(["git", "check-ignore", "-q", str(record.relative_to(ROOT))],
                          cwd=ROOT).returncode == 1  # in git: the README's `make run` line reads it


def test_the_report_page_is_built_by_make_results_not_kept_in_git() -> None:
    """reports/index.html carries its build date and commit, so it stays out of git (a re-run
    would always change it); `make results` builds it beside the README's tables."""
    assert subprocess.run(["git", "check-ignore", "-q", "reports/index.html"], cwd=ROOT).returncode == 0
    recipe = _run(["make", "-n", "results"], ROOT)
    assert any(re.fullmatch(r"\S*python\S* -m flows\.report --no-mlflow", line.strip())
               for line in recipe.splitlines()), recipe

