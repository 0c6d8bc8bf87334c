"""The pipeline's scheduling pieces without a Prefect server: the DAG read from DVC, stage
selection, and concurrent in-place stage runs recorded by DVC (a throwaway DVC repository)."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.params import ROOT, ParamsError, load
from flows.pipeline import quick_selection, select
from tasks import stages as st
from tasks.stages import run_command

DVC = str(Path(sys.executable).parent / "dvc")


def test_streams_output_and_returns_exit_code(tmp_path):
    lines = []
    rc, tail, timed_out = run_command([sys.executable, "-c", "print('a'); print('b'); raise SystemExit(3)"],
                                      tmp_path, lines.append)
    assert (rc, lines, tail, timed_out) == (3, ["a", "b"], ["a", "b"], False)


def test_timeout_kills_the_whole_process_group(tmp_path):
    # The child spawns a grandchild; both must die at the timeout, not after 30 s.
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
            "print('started', flush=True); time.sleep(30)")
    start = time.time()
    rc, tail, timed_out = run_command([sys.executable, "-c", code], tmp_path, lambda _: None, timeout_s=1.5)
    assert timed_out and rc != 0 and tail == ["started"]
    assert time.time() - start < 10


def test_a_process_left_behind_holding_the_output_does_not_hang_the_caller(tmp_path):
    """A command that exits while a process it started still holds its output (a study's inner
    pipeline killed while its temporary Prefect server ran) returns once the grace is over; the
    process left behind is killed."""
    pid_file = tmp_path / "orphan.pid"
    code = ("import subprocess, sys; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
            f"open({str(pid_file)!r}, 'w').write(str(p.pid)); print('left one behind', flush=True)")
    out: list = []
    caller = threading.Thread(target=lambda: out.append(run_command(
        [sys.executable, "-c", code], tmp_path, lambda _: None, orphans_grace_s=0.5)), daemon=True)
    caller.start()
    caller.join(120)  # without the reaper it reads the pipe for the orphan's 300 s
    assert not caller.is_alive() and out[0] == (0, ["left one behind"], False)
    orphan = int(pid_file.read_text())
    for _ in range(100):  # killed by SIGKILL: gone once its parent (init) reaps it
        if not Path(f"/proc/{orphan}").exists() or "Z" in Path(f"/proc/{orphan}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"process {orphan} left behind is still running")


@pytest.fixture(scope="module")
def graph():
    return st.stage_graph(ROOT)


def test_the_graph_is_dvcs(graph):
    """The DAG is read from dvc.yaml, matrix included: nothing is written down twice."""
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for m in params["methods"]:
        for s in params["seeds"]:
            assert graph[f"train@{m}-{s}"] == {"configure", "prepare", "build_base"}
            assert graph[f"evaluate@{m}-{s}"] == {"configure", "prepare", f"train@{m}-{s}"}
    evaluations = {s for s in graph if s.startswith("evaluate")}
    assert evaluations <= graph["report"]


def test_select_keeps_what_the_chosen_runs_need(graph):
    order = select(graph, methods=["rlme"], seeds=[1])
    # The base is sampled like the seeds chosen: its draw 1 (params base_draws) comes along.
    assert set(order) == {"prepare", "synthesize", "build_base", "configure", "evaluate_base",
                          "evaluate_base_draw@1", "premises", "train@rlme-1", "evaluate@rlme-1", "report"}
    assert "evaluate_base_draw@1" not in select(graph, methods=["rlme"], seeds=[0])
    for i, s in enumerate(order):  # every stage after the stages it depends on
        assert graph[s] & set(order) <= set(order[:i]), s
    assert order[-1] == "report"
    assert set(select(graph, stages=["train@rlvr-0"])) == {
        "prepare", "synthesize", "build_base", "configure", "train@rlvr-0"}


def test_the_quick_run_picks_from_the_study() -> None:
    params = load()
    methods, seeds = quick_selection(params, None, None)
    assert methods == params.pipeline.quick.methods and set(methods) < set(params.methods)
    assert seeds == [0]
    assert quick_selection(params, ["rlme"], [1]) == (["rlme"], [1])  # the command line wins
    with pytest.raises(ParamsError, match=r"pipeline\.quick\.methods \['rlme_long'\] are not in `methods`"):
        quick_selection(params, ["rlvr", "rlme_long"], None)  # a variant, not a study arm


def test_select_names_unknown_methods_and_stages(graph):
    with pytest.raises(ParamsError, match=r"\['nope'\] have no DVC stage.*rlvr"):
        select(graph, methods=["nope"])
    with pytest.raises(ParamsError, match="no DVC stage named"):
        select(graph, stages=["train@rlvr-99"])


def _sh(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, timeout=120,
                       env=st.stage_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture
def toy(tmp_path):
    """A DVC project with a -> b, a -> c: b and c are independent and each sleeps 3 s."""
    _sh(f"git init -q && {DVC} init -q", tmp_path)
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  a:\n    cmd: echo a > a.txt\n    outs: [a.txt]\n"
        "  b:\n    cmd: date +%s.%N > b.start && sleep 3 && cat a.txt > b.txt && echo b >> b.txt"
        " && date +%s.%N > b.end\n    deps: [a.txt]\n"
        "    outs: [b.txt]\n"
        "  c:\n    cmd: date +%s.%N > c.start && sleep 3 && cat a.txt > c.txt && date +%s.%N > c.end\n"
        "    deps: [a.txt]\n"
        "    metrics:\n      - c.txt:\n          cache: false\n")
    return tmp_path


def test_independent_stages_run_concurrently_and_dvc_records_both(toy):
    """The design that lets DVC stages overlap in one workspace: DVC's lock is held only to plan
    and record; the two 3 s stages' commands run at the same time (their start/end stamps
    overlap, whatever the machine's load), and `dvc repro` afterwards runs nothing."""
    assert st.reproduce_in_place("a", toy, log=lambda _: None) == "run"
    actions = {}
    threads = [threading.Thread(target=lambda s=s: actions.__setitem__(
        s, st.reproduce_in_place(s, toy, log=lambda _: None))) for s in ("b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert actions == {"b": "run", "c": "run"}
    stamp = {f"{s}.{e}": float((toy / f"{s}.{e}").read_text()) for s in "bc" for e in ("start", "end")}
    assert max(stamp["b.start"], stamp["c.start"]) < min(stamp["b.end"], stamp["c.end"]), (
        f"the two 3 s stages did not overlap: {stamp}")
    assert (toy / "b.txt").read_text() == "a\nb\n"
    assert "up to date" in _sh(f"{DVC} status", toy)
    assert "Running stage" not in _sh(f"{DVC} repro", toy)
    assert st.reproduce_in_place("b", toy, log=lambda _: None) == "skip"


def test_a_changed_input_reruns_downstream_and_the_run_cache_restores(toy):
    for s in ("a", "b", "c"):
        st.reproduce_in_place(s, toy, log=lambda _: None)
    (toy / "dvc.yaml").write_text((toy / "dvc.yaml").read_text().replace("echo a >", "echo A >"))
    assert [st.reproduce_in_place(s, toy, log=lambda _: None) for s in "abc"] == ["run"] * 3
    assert (toy / "b.txt").read_text() == "A\nb\n"
    # Back to the first command: `a` (no inputs, so never run-cached) runs, and b and c come back
    # from DVC's run-cache without running.
    (toy / "dvc.yaml").write_text((toy / "dvc.yaml").read_text().replace("echo A >", "echo a >"))
    assert [st.reproduce_in_place(s, toy, log=lambda _: None) for s in "abc"] == ["run", "restore",
                                                                                 "restore"]
    assert (toy / "b.txt").read_text() == "a\nb\n" and (toy / "c.txt").read_text() == "a\n"


def test_our_run_cache_rule_is_dvcs(toy):
    """`plan` asks `run_cache_applies` (our copy of DVC's private `_can_hash`) whether a stage can
    be restored from the run cache: `a` has no inputs, so never; `b` and `c` can. While the pinned
    DVC still has its private one, the two answer alike on every stage."""
    import contextlib

    from dvc.repo import Repo

    st.reproduce_in_place("a", toy, log=lambda _: None)  # b's and c's input now hashes
    with contextlib.chdir(toy), Repo(str(toy)) as repo:
        stages = {s.addressing: s for s in repo.index.stages}
        ours = {name: st.run_cache_applies(s) for name, s in stages.items()}
        assert ours == {"a": False, "b": True, "c": True}
        dvc_rule = getattr(__import__("dvc.stage.cache", fromlist=["_can_hash"]), "_can_hash", None)
        if dvc_rule is not None:
            assert {name: bool(dvc_rule(s)) for name, s in stages.items()} == ours


def test_a_failing_stage_names_itself_and_records_nothing(toy):
    st.reproduce_in_place("a", toy, log=lambda _: None)
    (toy / "dvc.yaml").write_text((toy / "dvc.yaml").read_text().replace(
        "sleep 3 && cat a.txt > c.txt", "echo disk on fire && exit 3"))
    with pytest.raises(st.StageFailed, match=r"stage c failed \(exit 3\): disk on fire"):
        st.reproduce_in_place("c", toy, log=lambda _: None)
    assert "c:" in _sh(f"{DVC} status c", toy)


def test_the_pool_executor_refuses_uncommitted_code(toy):
    _sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm init", toy)
    assert len(st.committed_revision(toy)) == 40
    (toy / "dvc.lock").write_text("stages: {}\n")  # results may differ from the commit
    (toy / "data").mkdir()
    st.committed_revision(toy)
    (toy / "dvc.yaml").write_text((toy / "dvc.yaml").read_text() + "\n")
    with pytest.raises(st.StageFailed, match="commit .* first: dvc.yaml"):
        st.committed_revision(toy)


def test_a_user_error_is_one_line_and_not_retried(toy):
    """Exit 2 is core/cli.py's "fix your input": the same input fails the same way, so the
    pipeline's retry condition refuses it; any other failure is retried."""
    from prefect.states import Failed

    from flows.pipeline import retryable

    st.reproduce_in_place("a", toy, log=lambda _: None)
    (toy / "dvc.yaml").write_text((toy / "dvc.yaml").read_text().replace(
        "date +%s.%N > c.start && sleep 3 && cat a.txt > c.txt && date +%s.%N > c.end",
        "\"echo loading; echo 'error: params.yaml: grpo.lr: unknown key' >&2; exit 2\""))
    with pytest.raises(st.StageInputError) as e:
        st.reproduce_in_place("c", toy, log=lambda _: None)
    assert str(e.value) == "stage c failed (exit 2): params.yaml: grpo.lr: unknown key"
    assert not retryable(None, None, Failed(data=e.value, message=repr(e.value)))
    crash = st.StageFailed("stage c failed (exit 1): KeyError: 'a'")
    assert retryable(None, None, Failed(data=crash, message=repr(crash)))


def test_a_forced_stage_starts_afresh(toy):
    """`--force` re-runs a training instead of resuming its finished run: resumable
    `checkpoint-*` folders beside the stage's outputs go with them."""
    (toy / "dvc.yaml").write_text((toy / "dvc.yaml").read_text().replace(
        "cmd: echo a > a.txt\n    outs: [a.txt]",
        "cmd: mkdir -p run && ls run > a.txt && echo a > run/out.txt\n    outs: [run/out.txt, a.txt]"))
    st.reproduce_in_place("a", toy, log=lambda _: None)
    (toy / "run" / "checkpoint-150").mkdir()
    st.reproduce_in_place("a", toy, force=False, log=lambda _: None)  # up to date: nothing goes
    assert (toy / "run" / "checkpoint-150").exists()
    assert st.reproduce_in_place("a", toy, force=True, log=lambda _: None) == "run"
    assert not (toy / "run" / "checkpoint-150").exists()
    assert (toy / "a.txt").read_text() == ""  # the command saw no checkpoint


@pytest.fixture
def run_pair(tmp_path):
    """A training (a cached checkpoint, a curve of record) and its evaluation (a result of
    record), recorded, then moved to another disk: the git-tracked records are there, DVC's
    cache and the checkpoint are not (a study resumed in a fresh clone)."""
    _sh(f"git init -q && {DVC} init -q", tmp_path)
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  train:\n    cmd: mkdir -p ck && cat cfg.txt > ck/w && wc -c < cfg.txt > curve.json\n"
        "    deps: [cfg.txt]\n"
        "    outs:\n      - ck\n      - curve.json:\n          cache: false\n"
        "  evaluate:\n    cmd: cat ck/w eval.txt > metrics.json\n    deps: [ck, eval.txt]\n"
        "    outs:\n      - metrics.json:\n          cache: false\n")
    (tmp_path / "cfg.txt").write_text("lr 1e-3\n")
    (tmp_path / "eval.txt").write_text("k 4\n")
    for s in ("train", "evaluate"):
        assert st.reproduce_in_place(s, tmp_path, log=lambda _: None) == "run"
    _sh("rm -rf ck .dvc/cache", tmp_path)
    return tmp_path


def test_a_resumed_study_keeps_a_recorded_run_and_trains_what_changed(run_pair):
    """`keep_recorded` (every `--study` call): a run whose records match dvc.lock keeps them
    instead of training again for a checkpoint nothing reads; without it (`make run`, `dvc
    repro`) DVC's rule stands and it trains."""
    before = (run_pair / "metrics.json").read_text()
    quiet = {"log": lambda _: None}
    assert st.recorded("train", run_pair) and st.recorded("evaluate", run_pair)
    assert [st.reproduce_in_place(s, run_pair, keep_recorded=True, **quiet)
            for s in ("train", "evaluate")] == ["recorded", "recorded"]
    assert not (run_pair / "ck").exists() and (run_pair / "metrics.json").read_text() == before
    # The evaluation's own input changed: it must run, so the checkpoint it reads is trained.
    (run_pair / "eval.txt").write_text("k 8\n")
    assert not st.recorded("evaluate", run_pair) and not st.recorded("train", run_pair)
    assert [st.reproduce_in_place(s, run_pair, keep_recorded=True, **quiet)
            for s in ("train", "evaluate")] == ["run", "run"]
    assert (run_pair / "metrics.json").read_text() == "lr 1e-3\nk 8\n"


@pytest.mark.parametrize("change", ["input", "record", "definition", "all missing"])
def test_a_run_whose_record_does_not_stand_trains(run_pair, change):
    if change == "input":
        (run_pair / "cfg.txt").write_text("lr 1e-2\n")
    elif change == "record":  # a result of record edited by hand is not a record of this run
        (run_pair / "curve.json").write_text("99\n")
    elif change == "definition":
        (run_pair / "dvc.yaml").write_text((run_pair / "dvc.yaml").read_text().replace(
            "wc -c < cfg.txt", "wc -l < cfg.txt"))
    else:  # nothing of record on this disk
        (run_pair / "curve.json").unlink()
    assert not st.recorded("train", run_pair)
    assert st.reproduce_in_place("train", run_pair, keep_recorded=True, log=lambda _: None) == "run"
    assert (run_pair / "ck" / "w").read_text() == (run_pair / "cfg.txt").read_text()
    assert not st.recorded("train", run_pair)  # ran: up to date now, nothing to keep
