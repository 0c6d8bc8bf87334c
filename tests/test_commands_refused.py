"""Bad input to the pipeline is refused in one line before any stage runs: on the command line
(`python -m flows.pipeline`, `--dry-run` included), and in a Prefect deployment's parameters (the
`pipeline` and `study` flows check theirs before their first task). Unknown methods, seeds,
stages, presets and study arms, and files params.yaml names that are missing
(flows/pipeline_checks.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.params import ROOT, Params, ParamsError, load


def cli(*args: str, preset: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LAB_PRESET"}
    if preset:
        env["LAB_PRESET"] = preset
    return subprocess.run([sys.executable, "-m", "flows.pipeline", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def one_line_error(r: subprocess.CompletedProcess) -> str:
    """The refusal: exit 2, one `error: ...` line on stderr, no traceback, nothing started."""
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "temporary server" not in r.stdout + r.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "named"), [
    (["--dry-run", "--methods", "rlvx"], "methods ['rlvx'] have no DVC stage"),
    (["--methods", "rlvx"], "methods ['rlvx'] have no DVC stage"),
    (["--dry-run", "--seeds", "99"], "seeds [99] have no DVC stage"),
    (["--stages", "train@rlvr-99"], "no DVC stage named ['train@rlvr-99']"),
    (["--dry-run", "--study", "hint_copyer"], "preset 'hint_copyer' is not defined"),
    (["--dry-run", "--study", "hint_copier", "--methods", "rlvx"],
     "--methods ['rlvx'] are not arms of the study hint_copier"),
    (["--dry-run", "--quick", "--max-parallel", "0"], "max_parallel 0: give 1 or more"),
])
def test_the_command_line_refuses_a_typo_before_anything_runs(args, named) -> None:
    line = one_line_error(cli(*args))
    assert named in line, line


def test_an_unknown_preset_is_refused_by_the_dry_run_too() -> None:
    line = one_line_error(cli("--dry-run", preset="tiny-typo"))
    assert "preset 'tiny-typo' is not defined; known: [" in line and "'ci'" in line, line


def test_an_unknown_method_names_the_known_ones() -> None:
    line = one_line_error(cli("--dry-run", "--methods", "rlvx"))
    assert "stages exist for:" in line and "rlvr" in line.split("stages exist for:")[1]


def with_missing_benchmark(tmp_path: Path) -> tuple[Params, Path]:
    """params.yaml with an external benchmark whose file is not there."""
    missing = tmp_path / "gsm8k_test.jsonl"
    params = load()
    ev = params.eval.model_copy(update={"benchmarks": [*params.eval.benchmarks, f"gsm8k:{missing}"]})
    return params.model_copy(update={"eval": ev}), missing


def test_a_missing_benchmark_file_is_refused_by_the_command_line(tmp_path, monkeypatch, capsys) -> None:
    """`python -m flows.pipeline` (its `main`, in process, with params naming a benchmark file
    that does not exist): exit 2 naming the key and the file, before the dry run reads DVC."""
    from flows import pipeline, pipeline_checks

    params, missing = with_missing_benchmark(tmp_path)
    monkeypatch.setattr(pipeline_checks, "load", lambda *a, **k: params)
    monkeypatch.setattr(pipeline, "dry_run", lambda args: pytest.fail("the dry run started"))
    monkeypatch.setattr(pipeline, "pipeline", lambda **k: pytest.fail("the pipeline started"))
    for argv in (["--dry-run"], ["--quick"]):
        monkeypatch.setattr(sys, "argv", ["flows.pipeline", *argv])
        with pytest.raises(SystemExit) as stop:
            pipeline.main()
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: params.yaml: eval.benchmarks: gsm8k:{missing}: no file {missing}", err


def test_missing_files_names_each_file_params_names(tmp_path) -> None:
    from flows.pipeline_checks import missing_files

    params, missing = with_missing_benchmark(tmp_path)
    assert missing_files(load(), ROOT) == []
    assert missing_files(params, ROOT) == [f"eval.benchmarks: gsm8k:{missing}: no file {missing}"]
    missing.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    assert missing_files(params, ROOT) == []
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    preset = next(name for name, p in raw["presets"].items()
                  if isinstance(p, dict) and (p.get("data") or {}).get("source") == "external")
    external = load(preset=preset)
    found = missing_files(external, tmp_path)  # relative paths read against an empty folder
    assert any(f.startswith("data.external.train: no file ") for f in found), found


# ------------------------------------------------------------------------------ deployments

@pytest.fixture
def no_stage_runs(monkeypatch):
    """Any stage, parent run or study workspace started fails the test."""
    from flows import pipeline
    from tasks import stages as st

    def started(*a, **k):
        pytest.fail("a stage or task started before the parameters were checked")

    for name in ("reproduce_in_place", "reproduce_on_worker", "plan"):
        monkeypatch.setattr(st, name, started)
    for name in ("_parent_run", "prepare_study", "run_study_pipeline", "record_study"):
        monkeypatch.setattr(pipeline, name, started)
    return pipeline


@pytest.mark.parametrize(("parameters", "named"), [
    ({"methods": ["rlvx"]}, "methods ['rlvx'] have no DVC stage"),
    ({"seeds": [99]}, "seeds [99] have no DVC stage"),
    ({"stages": ["train@nosuch-0"]}, "no DVC stage named"),
    ({"executor": "cloud"}, "executor 'cloud' is not one of: local, pool"),
    ({"max_parallel": 0}, "max_parallel 0: give 1 or more"),
    ({"leave_out": ["rlvx"]}, "leave_out ['rlvx'] have no DVC stage"),
])
def test_a_pipeline_deployments_parameters_are_checked_before_any_task(no_stage_runs, parameters,
                                                                         named) -> None:
    """`prefect deployment run 'pipeline/on-demand' --param ...` runs the flow function with these
    parameters: it fails at once, naming the bad one."""
    with pytest.raises(ParamsError) as err:
        no_stage_runs.pipeline.fn(**parameters)
    assert named in str(err.value)


def test_a_missing_file_fails_the_pipeline_flow_before_any_task(no_stage_runs, tmp_path, monkeypatch) -> None:
    params, missing = with_missing_benchmark(tmp_path)
    monkeypatch.setattr(no_stage_runs, "load", lambda *a, **k: params)
    with pytest.raises(ParamsError, match=f"no file {missing}"):
        no_stage_runs.pipeline.fn(methods=["rlvr"], seeds=[0])


@pytest.mark.parametrize(("parameters", "named"), [
    ({"preset": "hint_copyer"}, "preset 'hint_copyer' is not defined"),
    ({"preset": "hint_copier", "methods": ["rlvx"]}, "are not arms of the study hint_copier"),
    ({"preset": "hint_copier", "seeds": [99]}, "are not seeds of the study hint_copier"),
])
def test_a_study_deployments_parameters_are_checked_before_its_workspace(no_stage_runs, parameters,
                                                                          named) -> None:
    """`prefect deployment run 'study/preset' --param preset=...`: an unknown preset, arm or seed
    fails the flow run before it makes the study's workspace."""
    with pytest.raises(ParamsError) as err:
        no_stage_runs.study.fn(**parameters)
    assert named in str(err.value)


def test_the_deployments_own_parameters_pass_the_checks() -> None:
    """The checks refuse typos, not the deployments prefect.yaml declares."""
    from flows.pipeline_checks import check_pipeline, check_study
    from tasks.stages import stage_graph

    graph = stage_graph(ROOT)
    for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]:
        given = d.get("parameters") or {}
        if d["entrypoint"] == "flows/pipeline.py:pipeline":
            check_pipeline(load(), graph, **given)
        elif d["entrypoint"] == "flows/pipeline.py:study":
            check_study(given["preset"], given.get("methods"), given.get("seeds"))
