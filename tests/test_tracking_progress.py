"""The pipeline's progress line (flows/pipeline.py `_show_progress`, tasks/progress.py): stages
done of the total, and each running training's step of its total with an ETA, read from the
training's MLflow run; the raw per-step dictionaries still stream into the log beside it."""

from tasks.progress import Board


def test_progress_line_names_each_running_stage_its_step_and_eta(tmp_path, monkeypatch):
    import mlflow

    from flows import pipeline
    from tasks import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "progress")
    lines: list[str] = []

    class Log:
        def info(self, text, *args):
            lines.append(text % args if args else text)

    clock = iter([100.0, 400.0])
    monkeypatch.setattr(pipeline.time, "monotonic", lambda: next(clock))
    board = Board()
    running = {"train@rlme-0": None, "evaluate@rlvr-0": None}
    board.start("train@rlme-0", 0.0)
    board.start("evaluate@rlvr-0", 40.0)
    with tracking.run("rlme-seed0", {"stage": "train", "reward_method": "rlme", "seed": "0",
                                     "preset": "default"}):
        mlflow.log_param("max_steps", 150)
        mlflow.log_metrics({"reward": 0.1}, step=10)
        pipeline._show_progress(board, running, None, 5, 20, Log(), None)
        mlflow.log_metrics({"reward": 0.2}, step=40)
        pipeline._show_progress(board, running, None, 5, 20, Log(), None)
    # First sight: the step, no rate yet; then 30 steps in 300 s, 110 steps left: about 18 min.
    assert lines[0] == ("progress: 5/20 stages done; train@rlme-0 step 10/150; "
                        "evaluate@rlvr-0 running 1 min")
    assert lines[1] == ("progress: 5/20 stages done; train@rlme-0 step 40/150, ETA 18 min; "
                        "evaluate@rlvr-0 running 6 min")


def test_a_resumed_training_is_not_credited_with_its_earlier_steps():
    """A training resumed at step 100 of 150: the rate counts only the steps seen since."""
    board = Board()
    board.start("train@rlvr-0", 0.0)
    board.observe("train@rlvr-0", 100, 150, 0.0)
    board.observe("train@rlvr-0", 110, 150, 600.0)  # 10 steps in 10 min: 40 steps left
    assert board.line(0, 3, 600.0) == "progress: 0/3 stages done; train@rlvr-0 step 110/150, ETA 40 min"
