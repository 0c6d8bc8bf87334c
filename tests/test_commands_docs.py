"""Every documented command is run by a test, or says why CI does not run it; and the ones that
only read and print are run here, exactly as the pages write them.

Each command line of README.md and docs/*.md (parsed at test time by tests/test_doc_commands.py's
`shell_commands`: README.md is regenerated, so its current commands count, not a copy) must match
exactly one entry of `RUN_BY` (the test that runs it, checked to exist and to hold the command) or
`NOT_IN_CI` (the reason: it trains for hours, needs a GPU, another machine or the network,
rewrites tracked files, or only sets the shell's environment). A command added to a page that is
in neither fails `test_every_documented_command_is_run_or_excused`, naming the page and line; an
entry no page uses any more fails too. The commands matching `READ_ONLY` (a JSON file, DVC's
status, the dry run, the comparison table) must exit 0 from the repository's root.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from core.params import ROOT
from tests.test_doc_commands import DOCS, shell_commands

# ------------------------------------------------------------------------------ run, or why not

def normalized(command: str) -> str:
    """A documented command line as the tables below match it: continuations joined (as
    `shell_commands` reads them), runs of blanks collapsed."""
    return " ".join(command.split())


# Every documented command line is either run by a test or listed with why CI does not run it,
# and by exactly one pattern of the two tables (`re.fullmatch` on the `normalized` line): a new
# documented command that matches neither fails `test_every_documented_command_is_run_or_excused`.
# RUN_BY: pattern -> (where it runs, `tests/<file>.py::<test or fixture>` or `.ci/run`; a string
# that file holds where it runs the command). "At CI size": the same command on the `ci` preset in
# a clone (tests/test_orchestration.py `make_clone`), not on the study's params.
_READ_ONLY = "tests/test_commands_docs.py::test_the_read_only_commands_run_as_written"
_REPRO = "tests/test_orchestration.py::test_dvc_repro_end_to_end"  # `dvc repro` at CI size
_POOL = "tests/test_pool.py::test_two_workers_run_the_study_and_survive_a_killed_worker"  # test-slow
_PREFECT_AUTH = "tests/test_server_auth.py::test_prefect_server_refuses_unauthenticated_requests"
RUN_BY: dict[str, tuple[str, str]] = {
    # CI (.ci/run): the README's test command, then the slow suite less its `long` tests.
    r"make test": (".ci/run", "make test"),
    r"make test-ci": (".ci/run", "make test-ci"),
    r"\.venv/bin/python -m pytest( tests/test_\w+\.py)+ -q": (".ci/run", "make test"),  # a part of it
    # Read-only views, run as written from the repository's root.
    r"\.venv/bin/python -m json\.tool \S+\.json": (_READ_ONLY, r"-m json\.tool"),
    r"\.venv/bin/python -m flows\.pipeline --dry-run": (_READ_ONLY, r"-m flows\.pipeline --dry-run"),
    r"\.venv/bin/dvc (status|metrics diff HEAD~1|exp diff)": (_READ_ONLY, r"dvc exp diff"),
    r"scripts/gpu_smoke\.sh --list": (_READ_ONLY, r"gpu_smoke\.sh --list"),
    r"\.venv/bin/python -m flows\.compare( .*)?": (_READ_ONLY, r"-m flows\.compare"),
    r"\.venv/bin/python -m flows\.pipeline --dry-run --study hint_copier":
        ("tests/test_pipeline_plan.py::test_dry_run_prints_a_study_plan_and_writes_nothing",
         '"--dry-run", "--study", "hint_copier"'),
    r"\.venv/bin/dvc (metrics show --md|exp show --md --drop .*)":  # make test-slow, a fresh clone
        ("tests/test_doc_commands.py::test_the_read_only_dvc_views_of_a_fresh_clone",
         "dvc (metrics show|exp show)"),
    r"\.venv/bin/python -m tasks\.tracking --url":
        ("tests/test_tracking_setup.py::test_the_ui_link_finds_the_experiment_by_name_not_id",
         '"tasks.tracking", "--url"'),
    r"\.venv/bin/python -m flows\.report --figure \S+ --methods [\w ]+( --data-dir \S+)? --out fig\.html":
        ("tests/test_charts.py::test_the_figure_command_writes_an_offline_page_or_the_spec",
         '"--figure", "heldout:arith/pass@1"'),
    r"\.venv/bin/python -m flows\.report --data-dir data --out-dir \S+ --no-mlflow":  # on a ci report
        ("tests/test_report_browser.py::built", '"flows.report", "--preset", "ci", "--data-dir"'),
    r"\.venv/bin/python -m flows\.report":
        ("tests/test_studies.py::test_a_preset_study_runs_through_the_pipeline_and_resumes",
         '"flows.report", "--no-mlflow"'),
    r"cp docs/templates/my_method\.py rewards/my_method\.py":  # the template put on the path as copied
        ("tests/test_method_template.py::raw", 'ROOT / "docs" / "templates"'),
    r"make clean": ("tests/test_commands_clean.py::test_make_clean_keeps_every_tracked_file_and_says_what_it_removes",
                    '["make", "clean"]'),
    # The DAG at CI size: `dvc repro` runs each stage's command (dvc.yaml).
    r"\.venv/bin/dvc repro": (_REPRO, '"repro"'),
    r"\.venv/bin/python -m flows\.(prepare|build_base|evaluate --method (rlvr|base))": (_REPRO, '"repro"'),
    r"\.venv/bin/dvc plots show": (_REPRO, '"plots", "show"'),
    r"\.venv/bin/python -m flows\.train --method rlvr( --preset ci)?":
        ("tests/test_resume_kill.py::test_kill_minus_9_then_rerun_resumes", '"flows.train", "--method", "rlvr"'),
    r"\.venv/bin/dvc exp run -n \S+ -S \S+":  # make test-slow
        ("tests/test_orchestration.py::test_dvc_experiments_compare_on_the_results", '"exp", "run", "-n"'),
    # Prefect and MLflow servers, the deployments, a pool of workers (the pool: make test-slow).
    r"make prefect-server|scripts/prefect_server\.sh( &)?": (_PREFECT_AUTH, '"prefect_server.sh"'),
    r"PREFECT_SERVER_API_AUTH_STRING=\S+ PREFECT_HOST=0\.0\.0\.0 scripts/prefect_server\.sh":
        (_PREFECT_AUTH, '"PREFECT_SERVER_API_AUTH_STRING": PREFECT_AUTH'),
    r"make prefect-deploy": ("tests/test_orchestration.py::test_prefect_server_deployment_run", '"prefect_deploy.sh"'),
    r"\.venv/bin/prefect deployment run 'pipeline/on-demand' --watch":
        ("tests/test_orchestration.py::test_prefect_server_deployment_run",
         '"deployment", "run", "pipeline/on-demand"'),
    r"scripts/mlflow_server\.sh( &)?|MLFLOW_AUTH=1 .* scripts/mlflow_server\.sh":
        ("tests/test_server_auth.py::test_mlflow_server_refuses_unauthenticated_requests", '"MLFLOW_AUTH": "1"'),
    r"\.venv/bin/dvc remote add --local -d shared /srv/dvc-remote":
        (_POOL, '"remote", "add", "--local", "-d", "shared"'),
    r"POOL_LIMIT=4 scripts/prefect_pool\.sh": (_POOL, '"scripts/prefect_pool.sh"'),
    r"git clone \. \.\./worker1 && .* scripts/prefect_worker\.sh": (_POOL, '"scripts/prefect_worker.sh"'),
    r"\.venv/bin/python -m flows\.pipeline --executor pool": (_POOL, '"--executor", "pool"'),
    r"scripts/gpu_smoke\.sh --cpu":
        ("tests/test_gpu_path.py::test_gpu_smoke_script_passes_on_the_cpu", '"--cpu", "--work"'),
}

_HOURS = "trains on the study's params: an hour or more on a CPU"
NOT_IN_CI: dict[str, str] = {
    r"export [A-Z_]+=\S+( [A-Z_]+=\S+)*|\. \.venv/bin/activate":
        "sets the shell's environment for the commands after it (each listed on its own)",
    # The study and its parts on the study's params; their CI-size runs are RUN_BY's.
    r"make run": _HOURS + " (the README's `make run` line says how long, from reports/times/quick.json)",
    r"\.venv/bin/python -m flows\.pipeline --quick": _HOURS + "; on the ci preset (docs/configuration.md) "
        "tests/test_orchestration.py runs the same pipeline flow",
    r"make (study|studies)( ARGS=.*)?": _HOURS,
    r"\.venv/bin/python -m flows\.pipeline --study .*": _HOURS + " (a study builds its own base); "
        "tests/test_studies.py runs `--study` on a ci-size preset",
    r"make base": "rebuilds the base of record: about an hour, and another CPU builds another base "
                  "(docs/speed.md); tests/test_training_smoke.py builds a tiny one twice",
    r"\.venv/bin/python -m flows\.build_judge": "trains rlme_judge's evaluator model (not a stage of the "
                                                "study); tests/test_methods.py checks its refusal of a real base",
    r"make results": "rewrites tracked files (README.md's and docs/speed.md's tables, reports/) from the "
                     "committed records: run by hand before a commit; tests/test_report.py tests the writers",
    r"\.venv/bin/python -m flows\.charts --dvc-template": "rewrites .dvc/plots/overlay.json (tracked); "
        "tests/test_charts.py checks the committed file is what it writes",
    r"\.venv/bin/dvc plots diff HEAD~1": "renders two commits' curves into dvc_plots/; its template is "
                                         "tests/test_charts.py's, and `dvc plots show` runs at CI size",
    r"\.venv/bin/python -m benchmarks\.\w+( .*)?": "a measurement (a timing, a Monte Carlo, a run trained "
        "again): minutes to hours here, and its numbers are this machine's (benchmarks/results/, docs/speed.md)",
    r"\.venv/bin/python -m flows\.mlflow_records( .*)?": "writes this checkout's MLflow store (mlflow/: "
        "your run history); tests/test_mlflow_records.py imports the committed records into a scratch one",
    r"make mlflow-ui": "a UI server that runs until stopped; its link (`tasks.tracking --url`) is tested",
    r"make test-slow": "the whole slow suite, `long` tests included: past CI's 40-minute budget "
                       "(.ci/run runs make test-ci, the same less those)",
    r"make revalidate SINCE=<commit>( ARGS=--dry-run)?": "names a commit to fill in; its canaries train "
        "for minutes (tests/test_revalidate.py tests the flow's parts)",
    r"\.venv/bin/prefect deployment run (?!'pipeline/on-demand' --watch$).*": "needs a running server and "
        "worker and trains on the study's params; 'pipeline/on-demand' runs at CI size",
    # A GPU, another machine, the network.
    r"python -m flows\.(pipeline|(train|evaluate) --method \w+ --seed 0|prepare && .*)|"
    r"CUDA_VISIBLE_DEVICES=\S+ .*|NUM_MACHINES=2 .*": "a GPU preset (docs/gpu.md, docs/multiprocess.md): "
                                                       "CUDA and a real model",
    r"make gpu-smoke|scripts/gpu_smoke\.sh (?!--cpu$|--list$).*": "needs a GPU (docs/gpu.md); its CPU form "
                                                                   "is tests/test_gpu_path.py's",
    r"\.venv/bin/python -m flows\.prepare --preset \w+": "a GPU preset's data: the local GSM8K or MATH "
                                                         "files of docs/own_data.md",
    r"\.venv/bin/python -m flows\.pipeline --stages prepare --force": "re-prepares this checkout's data "
        "(dvc.lock, tracked, changes); tests/test_orchestration.py checks a new local file makes prepare stale",
    r"make setup|\.venv/bin/pip (install|check).*|pip install \S+": "installs packages from the network",
    r"git clone \. \.\./lab-ci && cd \.\./lab-ci && make setup": "a second clone with its own "
                                                                  "virtualenv, installed from the network",
    r"\.venv/bin/hf download .*": "downloads a model from the Hugging Face Hub",
    r"rsync .*": "copies to another machine (gpu-host)",
}


def coverage(text: str) -> list[str]:
    """One line per command of a markdown text that no table entry, or more than one, names."""
    problems = []
    for line, command, _ in shell_commands(text):
        if not command:
            continue
        found = [p for p in (*RUN_BY, *NOT_IN_CI) if re.fullmatch(p, normalized(command))]
        if not found:
            problems.append(f"line {line}: `{normalized(command)}` is run by no test and not excused: add "
                            "it to RUN_BY (the test that runs it) or NOT_IN_CI (why CI cannot)")
        elif len(found) > 1:
            problems.append(f"line {line}: `{normalized(command)}` matches {found}: one entry each")
    return problems


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_documented_command_is_run_or_excused(page):
    """README.md is read as it is now (it is regenerated): its commands, not its text, count."""
    problems = coverage(page.read_text(encoding="utf-8"))
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_a_new_command_is_neither_run_nor_excused():
    """The check can fail: a command documented tomorrow lands in neither table."""
    snippet = "```bash\nmake frobnicate\n.venv/bin/python -m flows.pipeline --dry-run  # known\n```\n"
    problems = coverage(snippet)
    assert len(problems) == 1 and "`make frobnicate` is run by no test" in problems[0], problems


def test_each_test_named_runs_the_command():
    """Each RUN_BY names a test (or fixture, or CI's script) that exists and holds the string that
    shows where it runs the command."""
    for pattern, (where, evidence) in RUN_BY.items():
        path, _, name = where.partition("::")
        source = (ROOT / path).read_text(encoding="utf-8")
        if name:
            assert re.search(rf"^(async )?def {re.escape(name)}\(", source, re.M), f"{pattern}: no {where}"
        assert evidence in source, f"{pattern}: {path} does not hold {evidence!r}"


def test_no_entry_outlives_its_command():
    """An entry that names no documented command any more goes (or it would excuse a new one)."""
    commands = [normalized(c) for p in DOCS for _, c, _ in shell_commands(p.read_text(encoding="utf-8")) if c]
    stale = [p for p in (*RUN_BY, *NOT_IN_CI) if not any(re.fullmatch(p, c) for c in commands)]
    assert not stale, stale
    assert all(reason.strip() for reason in NOT_IN_CI.values()), "every NOT_IN_CI entry says why"


# ------------------------------------------------------------------------------ the read-only ones

# Commands that only read (the repository, DVC's status, a JSON file) and print, seconds each.
READ_ONLY = (
    r"\.venv/bin/python -m json\.tool (reports|data)/[\w./]+\.json",
    r"\.venv/bin/python -m flows\.pipeline --dry-run",
    r"\.venv/bin/dvc status",
    r"\.venv/bin/dvc metrics diff HEAD~1",
    r"\.venv/bin/dvc exp diff",
    r"scripts/gpu_smoke\.sh --list",
    r"\.venv/bin/python -m flows\.compare( .*)?",
)
# What prints nothing when there is nothing to say (no change since HEAD).
QUIET = (r"\.venv/bin/dvc (exp|metrics) diff.*", r"\.venv/bin/dvc status")


def documented(patterns=READ_ONLY) -> list[tuple[str, str]]:
    """(page:line, command) of every documented command matching one of `patterns`."""
    found = []
    for page in DOCS:
        for line, command, _ in shell_commands(page.read_text(encoding="utf-8")):
            text = normalized(command)
            if any(re.fullmatch(p, text) for p in patterns):
                found.append((f"{page.relative_to(ROOT)}:{line}", text))
    return found


def test_every_read_only_pattern_is_documented() -> None:
    """A pattern no page uses runs nothing: drop it rather than let it pass silently."""
    for pattern in READ_ONLY:
        assert documented((pattern,)), f"no documented command matches {pattern}"


@pytest.mark.parametrize(("where", "command"), sorted(set(documented())), ids=lambda v: v)
def test_the_read_only_commands_run_as_written(where, command) -> None:
    if "HEAD~1" in command and subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD~1"], cwd=ROOT,
                                              capture_output=True).returncode != 0:
        pytest.skip("a clone without the commit before HEAD (shallow)")
    done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{where}: {command}\n{done.stderr[-2000:]}"
    if not any(re.fullmatch(p, command) for p in QUIET):
        assert done.stdout.strip(), f"{where}: {command} printed nothing"
