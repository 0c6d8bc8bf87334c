"""MLflow tracking: one sqlite store under `mlflow/`, one experiment, a run per (study, method,
seed, config), each pipeline invocation a parent run over the runs it created.

A study is the preset a run's params select (`preset` tag; `default` when none): the same method
and seed on another base (`make studies`, tasks/studies.py) is another run, named
`<preset>/<method>-seed<S>` in the runs table, and the saved comparison draws one chart per
study and task, never overlaying runs of different bases.

The tracking URI is absolute and resolved from the repository root, so every stage, test and the
`mlflow ui` command see the same store whatever the current directory (MLflow's default path
depends on it; the file store is gone since 3.13). `MLFLOW_TRACKING_URI` overrides it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

from core.params import ROOT

EXPERIMENT = "nolabel-rl-lab"
# Set by the pipeline flow for the stages it runs: their new runs become children of the
# invocation's parent run and carry the Prefect flow-run id.
PARENT_ENV = "LAB_MLFLOW_PARENT_RUN_ID"
FLOW_RUN_ENV = "LAB_PREFECT_FLOW_RUN_ID"
# MLflow 3 opens an experiment on its GenAI pages unless told it holds model training runs.
_KIND = {"mlflow.experimentKind": "custom_model_development"}


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{ROOT / 'mlflow' / 'mlflow.db'}"


def setup() -> None:
    """Point MLflow (and transformers' MLflow callback, which reads the env) at the store."""
    import mlflow

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    uri = tracking_uri()
    os.environ["MLFLOW_TRACKING_URI"] = uri
    os.environ["MLFLOW_EXPERIMENT_NAME"] = os.environ.get("MLFLOW_EXPERIMENT_NAME", EXPERIMENT)
    (ROOT / "mlflow").mkdir(exist_ok=True)
    mlflow.set_tracking_uri(uri)
    name = os.environ["MLFLOW_EXPERIMENT_NAME"]
    # One process at a time creates the sqlite schema and the experiment: two stages started
    # together on a fresh clone (two trainings, a Prefect pool) otherwise race, and the loser
    # fails with "table experiments already exists".
    with open(ROOT / "mlflow" / ".setup.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        exp = mlflow.get_experiment_by_name(name)
        if exp is None:
            # A tracking server (scripts/mlflow_server.sh) stores artifacts where it was told to
            # (proxied, so every worker's artifacts reach it); a local store keeps them in mlflow/.
            local = not uri.startswith(("http://", "https://"))
            mlflow.create_experiment(
                name, artifact_location=(ROOT / "mlflow" / "artifacts").as_uri() if local else None,
                tags=_KIND)
        elif any(exp.tags.get(k) != v for k, v in _KIND.items()):
            for k, v in _KIND.items():
                mlflow.MlflowClient().set_experiment_tag(exp.experiment_id, k, v)
    mlflow.set_experiment(name)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def data_hash(folder: Path, pattern: str = "*.jsonl") -> str:
    """A short content hash of the files of `folder` matching `pattern` (names and bytes)."""
    h = hashlib.sha256()
    for p in sorted(Path(folder).glob(pattern)):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = str(v)[:500]
    return out


@contextmanager
def run(name: str, tags: dict[str, str], params: dict | None = None, run_id: str | None = None):
    """Start (and always end) an MLflow run with tags and flattened params; `run_id` continues
    an existing run instead."""
    import mlflow

    setup()
    tags = {**tags, **invocation_tags(new=run_id is None)}
    name = run_name(name, tags.get("preset"))
    with mlflow.start_run(run_id=run_id, run_name=None if run_id else name, tags=tags) as active:
        if params and not run_id:
            items = list(flatten(params).items())
            for i in range(0, len(items), 100):
                mlflow.log_params(dict(items[i:i + 100]))
        yield active


def run_name(name: str, preset: str | None) -> str:
    """A run's name in the runs table: `name` in the default study, `<preset>/<name>` in a
    preset's (the same method and seed on another base must not read as the same run).

    >>> run_name("rlme-seed0", None), run_name("rlme-seed0", "default"), run_name("rlme-seed0", "hint_copier")
    ('rlme-seed0', 'rlme-seed0', 'hint_copier/rlme-seed0')
    """
    return name if preset in (None, "", "default") else f"{preset}/{name}"


def experiment_url(host: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI's runs table of the lab's experiment, found by name (ids differ between
    stores; a fresh clone's store is created here, with the experiment, so the link opens)."""
    import mlflow

    setup()
    exp = mlflow.get_experiment_by_name(os.environ["MLFLOW_EXPERIMENT_NAME"])
    return f"{host.rstrip('/')}/#/experiments/{exp.experiment_id}?workflowType=machine_learning"


def training_progress(method: str, seed: int, preset: str | None = None) -> tuple[int, int] | None:
    """(step, max_steps) of the running training of (study, method, seed), read from its MLflow
    run: the newest step of its logged training metrics and transformers' `max_steps` param.
    None when no such run is running or it has logged no step yet."""
    from mlflow.tracking import MlflowClient

    match = {"stage": "train", "reward_method": method, "seed": str(seed),
             "preset": preset or "default"}
    running = [r for r in previous_runs(match) if r.info.status == "RUNNING"]
    if not running:
        return None
    r = running[0]
    total = r.data.params.get("max_steps")
    client = MlflowClient()
    steps = [m.step for key in ("reward", "loss") if key in r.data.metrics
             for m in client.get_metric_history(r.info.run_id, key)]
    if not steps or not total or not str(total).lstrip("-").isdigit() or int(total) <= 0:
        return None
    return max(steps), int(total)


def invocation_tags(new: bool) -> dict[str, str]:
    """Tags tying a run to the pipeline invocation that ran it: a new run becomes a child of
    the invocation's parent run; every run notes the last Prefect flow run that touched it."""
    tags = {}
    if os.environ.get(FLOW_RUN_ENV):
        tags["prefect_flow_run_id"] = os.environ[FLOW_RUN_ENV]
    if new and os.environ.get(PARENT_ENV):
        tags["mlflow.parentRunId"] = os.environ[PARENT_ENV]
    return tags


def start_parent(name: str, tags: dict[str, str]) -> str:
    """Open the parent run of a pipeline invocation (ended by `end_parent`); its id."""
    from mlflow.tracking import MlflowClient

    setup()
    client = MlflowClient()
    exp = client.get_experiment_by_name(os.environ["MLFLOW_EXPERIMENT_NAME"])
    return client.create_run(exp.experiment_id, run_name=name, tags=tags).info.run_id


def end_parent(run_id: str, metrics: dict[str, float], ok: bool) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    for k, v in metrics.items():
        client.log_metric(run_id, k, v)
    client.set_terminated(run_id, status="FINISHED" if ok else "FAILED")


# Tag of a run that a later attempt of the same training replaced (training_run_id).
SUPERSEDED = "superseded"


def previous_runs(match: dict[str, str]) -> list:
    """Runs of the lab's experiment whose tags equal `match`, newest first (deleted runs and runs a
    retry superseded excluded)."""
    from mlflow.tracking import MlflowClient

    setup()
    client = MlflowClient()
    exp = client.get_experiment_by_name(os.environ["MLFLOW_EXPERIMENT_NAME"])
    query = " and ".join(f"tags.{k} = '{v}'" for k, v in match.items())
    runs = client.search_runs([exp.experiment_id], query, order_by=["attributes.start_time DESC"])
    return [r for r in runs if SUPERSEDED not in r.data.tags]


def training_run_id(match: dict[str, str], resumable: bool) -> str | None:
    """The MLflow run a training with these identifying tags continues, so that every (method,
    seed, config) has one run however often its stage is retried or re-run.

    A run left unfinished by a killed attempt is continued when this attempt resumes from its
    checkpoints (same workspace); when it starts over (e.g. retried on another worker) the
    unfinished run is tagged `superseded` and ended KILLED, and a new one begins, so no step is
    logged twice. Nothing is deleted: a pool's workers need only EDIT on the lab's experiment
    (scripts/mlflow_server.sh), and the crashed attempt's curve stays readable. A finished run
    is continued (adopting its trained weights adds the test metrics to it, no second run)."""
    from mlflow.tracking import MlflowClient

    keep: str | None = None
    runs = previous_runs(match)  # first: it points MLflow at the store (setup)
    client = MlflowClient()
    for r in runs:
        if keep is None and (r.info.status == "FINISHED" or resumable):
            keep = r.info.run_id
        elif r.info.status != "FINISHED":
            client.set_tag(r.info.run_id, SUPERSEDED, "a retry started over")
            client.set_terminated(r.info.run_id, status="KILLED")
    return keep


def set_tags(tags: dict[str, str]) -> None:
    import mlflow

    mlflow.set_tags(tags)


def log_metrics(metrics: dict[str, float], step: int | None = None) -> None:
    import mlflow

    clean = {k.replace("@", "_at_"): float(v) for k, v in metrics.items()
             if isinstance(v, (int, float)) and v == v}
    mlflow.log_metrics(clean, step=step)


def log_model_pointer(folder: Path, max_mb: float = 50.0) -> None:
    """Log the final weights themselves when small (the tiny model), else a pointer to the DVC output."""
    import mlflow

    folder = Path(folder)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6
    mlflow.set_tag("checkpoint", str(folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder))
    if size <= max_mb:
        mlflow.log_artifacts(str(folder), artifact_path="final_model")
    else:
        mlflow.log_text(f"{folder} ({size:.0f} MB): a DVC output; `dvc pull`/`dvc repro` restores it\n",
                        "final_model/POINTER.txt")


def log_artifacts(folder: Path) -> None:
    import mlflow

    mlflow.log_artifacts(str(folder), artifact_path=Path(folder).name)


# The held-out headline metric of each task, as the training runs log it (MLflow names hold no `@`).
HEADLINE_CURVES = {"arith": "heldout/arith/pass_at_1", "facts": "heldout/facts/coverage",
                   "pairs": "heldout/pairs/rc", "arith_ref": "heldout/arith_ref/pass_at_1"}


def comparison_link(experiment_id: str, run_ids: list[str], metric: str) -> str:
    """The MLflow UI's metric page with `metric` of every run in `run_ids` overlaid on one chart
    (a URL fragment of the UI's own route, `MetricPage`: the query holds JSON values, so it works on
    any tracking server).

    >>> link = comparison_link("1", ["a", "b"], "heldout/arith/pass_at_1")
    >>> link.startswith('#/metric/?runs=%5B%22a%22%2C%22b%22%5D&metric=%22heldout%2Farith%2Fpass_at_1%22&')
    True
    """
    import json
    from urllib.parse import quote, urlencode

    def js(value: object) -> str:
        return json.dumps(value, separators=(",", ":"))

    query = {"runs": js(run_ids), "metric": js(metric), "experiments": js([experiment_id]),
             "plot_metric_keys": js([metric]), "plot_layout": "{}", "x_axis": "step",
             "y_axis_scale": "linear", "line_smoothness": "1", "show_point": "false",
             "deselected_curves": "[]", "last_linear_y_axis_range": "[]"}
    return f"#/metric/?{urlencode(query, quote_via=quote)}"


def study_of(tags: dict[str, str]) -> str:
    """The study a run belongs to: its `preset` tag (runs from before the tag: `default`)."""
    return tags.get("preset") or "default"


def save_comparison(parent_run_id: str | None = None) -> str:
    """Set up the saved comparison of held-out accuracy across methods: for each study (preset)
    and task, a link to one chart of its headline held-out curve with the newest training run of
    every (study, method, seed) on that task overlaid; the default study first. Runs of another
    study stand on another base, so they get charts of their own and never replace a default
    run. The links go into the experiment's description (shown above the runs table) and the
    pipeline invocation's parent run note. Returns the markdown."""
    from mlflow.tracking import MlflowClient

    setup()
    client = MlflowClient()
    exp = client.get_experiment_by_name(os.environ["MLFLOW_EXPERIMENT_NAME"])
    newest: dict[tuple[str, str, str], object] = {}
    for r in previous_runs({"stage": "train"}):  # newest first
        key = (study_of(r.data.tags), r.data.tags.get("reward_method", ""), r.data.tags.get("seed", ""))
        newest.setdefault(key, r)
    groups: dict[tuple[str, str], list] = {}
    for (study, _method, _seed), r in sorted(newest.items(), key=lambda kv: (kv[0][0] != "default", kv[0])):
        groups.setdefault((study, r.data.tags.get("task", "")), []).append(r)
    lines = ["### Held-out accuracy, every method (saved by the pipeline)", ""]
    for (study, task), runs in groups.items():
        metric = HEADLINE_CURVES.get(task)
        if metric is None:
            continue
        names = ", ".join(sorted({r.data.tags.get("reward_method", "?") for r in runs}))
        link = comparison_link(exp.experiment_id, [r.info.run_id for r in runs], metric)
        count = f"{len(runs)} run{'s' * (len(runs) != 1)}"
        lines.append(f"- [{study} study, {task}: `{metric}`, {count} ({names})]({link})")
    text = "\n".join(lines) + "\n"
    client.set_experiment_tag(exp.experiment_id, "mlflow.note.content", text)
    if parent_run_id:
        client.set_tag(parent_run_id, "mlflow.note.content", text)
    return text


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(description="The lab's MLflow store (tasks/tracking.py).")
    p.add_argument("--url", action="store_true",
                   help="print the UI's runs-table URL of the lab's experiment (found by name)")
    p.add_argument("--host", default="http://127.0.0.1:5000", help="where `mlflow ui` serves")
    args = p.parse_args(argv)
    if args.url:
        print(experiment_url(args.host))
    else:
        p.print_help()


if __name__ == "__main__":
    main()
