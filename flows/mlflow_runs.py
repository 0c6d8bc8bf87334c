"""What an imported run of record holds in MLflow, and the store brought in line with the records
(`flows/mlflow_records.py` reads the records and runs the import; its docstring says what a run
holds and when one is imported, kept or replaced).

- `metrics_of`, `tags_of`, `params_of`: one record as MLflow metrics (step-indexed curves, the
  names live runs log: `tasks/tracking.py`), tags (the collapse labels of `flows/alarms.py`,
  stale, outdated) and params;
- `sync`: the experiment's imported runs made to match the records, through MlflowClient and
  log_batch (no run twice: found again by `record_key`, kept while `record_digest` is unchanged);
- `comparison_note`, `write_note`: the experiment's description links one chart per study and task.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flows.report_collect import number

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from flows.mlflow_records import Record

SOURCE = "records"
# The experiment note's section written here (after the pipeline's saved comparison, if any).
NOTE_HEAD = "### Committed runs (imported from the records by `python -m flows.mlflow_records`)"


# ------------------------------------------------------------------------------ what a run holds

_BAD = re.compile(r"[^\w\-. /]")


def metric_key(name: str) -> str:
    """An MLflow metric name as the lab's live runs write it (`tasks/tracking.py`, `log_metrics`).

    >>> metric_key("heldout/arith/pass@1"), metric_key("self_eval/auroc(q0)")
    ('heldout/arith/pass_at_1', 'self_eval/auroc_q0_')
    """
    return _BAD.sub("_", name.replace("@", "_at_"))


def curve(rows: Sequence[dict], prefix: str, skip: tuple[str, ...] = ()) -> list[tuple[str, float, int]]:
    """(name, value, step) of every finite number of step-indexed `rows`."""
    out = []
    for row in rows:
        step = number(row.get("step"))
        if step is None:
            continue
        for k, v in row.items():
            if k != "step" and not k.startswith(skip) and (x := number(v)) is not None:
                out.append((metric_key(prefix + k), x, int(step)))
    return out


def collapse_flags(heldout: Sequence[dict], events: Sequence[dict]) -> list[tuple[str, float, int]]:
    """The detector's `heldout/collapse/<kind>` flags at each held-out step, as a live run logs
    them (models/collapse.py `metrics`): 1 from the step an event of that kind fired at.

    >>> collapse_flags([{"step": 0}, {"step": 25}], [{"kind": "entropy", "step": 25}])[:2]
    [('heldout/collapse/reward_hacking', 0.0, 0), ('heldout/collapse/entropy', 0.0, 0)]
    """
    from models.collapse import KINDS

    steps = sorted({int(s) for r in heldout if (s := number(r.get("step"))) is not None})
    fired = [(e.get("kind"), number(e.get("step"))) for e in events]
    return [(f"heldout/collapse/{kind}", float(any(k == kind and s is not None and s <= step
                                                   for k, s in fired)), step)
            for step in steps for kind in KINDS]


def metrics_of(rec: Record) -> list[tuple[str, float, int]]:
    run = rec.run
    out = [(metric_key(f"test/{k}"), x, 0) for k, v in (run.metrics or {}).items()
           if (x := number(v)) is not None]
    out += curve(run.train, "")
    out += curve(run.heldout, "heldout/", skip=("train/",))
    if run.heldout:
        out += collapse_flags(run.heldout, run.events)
    out += curve(run.test, "test_curve/")
    out += [(metric_key(f"run/{k}"), x, 0) for k, v in (run.summary or {}).items()
            if (x := number(v)) is not None and k != "seed"]
    return out


def labels(rec: Record) -> dict[str, str]:
    """The lab's collapse labels of a trained run (flows/alarms.py's rules), "" where a label
    has too little to read."""
    from flows.alarms import MIN_EVALS, headline_key, heldout_curve, independent_label, label_run

    key = headline_key(rec.run.heldout)
    if key is None:
        return {}
    val = heldout_curve(rec.run.heldout, key)
    test = independent_label(heldout_curve(rec.run.test, key),
                             number((rec.base_metrics or {}).get(key)),
                             number((rec.run.metrics or {}).get(key)))
    return {"task": key.partition("/")[0], "collapse_metric": key,
            "collapse_label": label_run(val).label if len(val) >= MIN_EVALS else "",
            "collapse_label_test": test["label"] if test else ""}


def headline_of(rec: Record) -> list[str]:
    """The MLflow names of the run's headline metrics (its headline.json keys, DVC's metric:
    `evals/registry.py` `headline`), the runs table's columns to compare."""
    from evals.registry import headline

    return [metric_key(f"test/{k}") for k in headline(rec.run.metrics or {})]


def tags_of(rec: Record, digest: str) -> dict[str, str]:
    run = rec.run
    tags = {"study": rec.study, "preset": rec.preset, "reward_method": rec.method,
            "base": run.base, "stale": "true" if run.stale else "false", "outdated": rec.outdated,
            "record_key": rec.key, "record_digest": digest}
    if headline := headline_of(rec):
        tags["headline_metrics"] = " ".join(headline)
    if rec.seed is not None:
        tags["seed"] = str(rec.seed)
        tags.update(labels(rec))
        if run.summary is not None:
            tags["collapsed"] = str(bool(run.summary.get("collapsed"))).lower()
            tags.update({f"collapse.{e.get('kind')}": f"step {e.get('step')}: {e.get('message', '')}"[:500]
                         for e in run.events})
    note = [f"Imported from the records: {', '.join(f.relative_to(rec.root).as_posix() for f in rec.files)}."]
    if run.stale:
        note.append(f"Stale: {run.stale}; the report leaves it out.")
    if rec.outdated == "true":
        note.append("Outdated: its run file in dvc.lock differs from HEAD's (flows/configure.py); "
                    "the settings it ran with are not in the records, so none are logged.")
    tags["mlflow.note.content"] = " ".join(note)
    return tags


def params_of(rec: Record) -> dict[str, str]:
    from tasks.tracking import flatten

    out = {"study": rec.study, "preset": rec.preset, "method": rec.method}
    if rec.seed is not None:
        out["seed"] = str(rec.seed)
    if (config := (rec.run.summary or {}).get("config_hash")) is not None:
        out["config_hash"] = str(config)
    out.update({f"{kind}.run_file_md5": md5 for kind, md5 in rec.run_files.items()})
    out.update(flatten(rec.settings))
    return out


# ------------------------------------------------------------------------------ the store

@dataclass
class Summary:
    imported: int = 0
    replaced: int = 0
    unchanged: int = 0
    live: int = 0
    removed: int = 0
    ids: dict[str, str] = field(default_factory=dict)  # record key -> MLflow run id

    def line(self) -> str:
        return (f"{len(self.ids)} runs of record in MLflow: {self.imported} imported, "
                f"{self.replaced} replaced, {self.unchanged} unchanged, {self.live} logged live "
                f"(tagged), {self.removed} removed")


def imported_runs(client: MlflowClient, experiment_id: str) -> dict[str, list]:
    """record key -> the imported runs of the experiment that carry it (not deleted)."""
    out: dict[str, list] = {}
    token = None
    while True:
        page = client.search_runs([experiment_id], f"tags.source = '{SOURCE}'", max_results=1000,
                                  page_token=token)
        for r in page:
            out.setdefault(r.data.tags.get("record_key", ""), []).append(r)
        token = page.token
        if not token:
            return out


def _live_run(client: MlflowClient, experiment_id: str, rec: Record):
    """The run this store logged live for the record (its run.json's `run_id`), if it has it."""
    from mlflow.exceptions import MlflowException

    run_id = (rec.run.summary or {}).get("run_id")
    if not isinstance(run_id, str) or not run_id:
        return None
    try:
        run = client.get_run(run_id)
    except MlflowException:
        return None
    ok = run.info.experiment_id == experiment_id and run.info.lifecycle_stage == "active"
    return run if ok and run.data.tags.get("source") != SOURCE else None


def _batches(metrics: list, params: list, tags: list) -> Iterator[tuple[list, list, list]]:
    """MLflow's log_batch limits: 1000 entries in all, 100 params, 100 tags."""
    while metrics or params or tags:
        p, params = params[:100], params[100:]
        t, tags = tags[:100], tags[100:]
        room = 1000 - len(p) - len(t)
        m, metrics = metrics[:room], metrics[room:]
        yield m, p, t


def step_milliseconds(rec: Record, last_step: int) -> float:
    """The time an imported run gives each step: its recorded training wall time spread evenly
    over its steps where the record holds one (so the run's Duration is its training's), else one
    second a step (the records hold no per-step wall time)."""
    seconds = number((rec.run.summary or {}).get("train_seconds")) or number(rec.run.train_seconds)
    return 1000.0 if not seconds or last_step <= 0 else seconds * 1000.0 / last_step


def log_record(client: MlflowClient, experiment_id: str, rec: Record, digest: str) -> str:
    """One new MLflow run holding the record; its id."""
    from mlflow.entities import Metric, Param, RunTag

    values = metrics_of(rec)
    last = max((s for _, _, s in values), default=0)
    ms_per_step = step_milliseconds(rec, last)
    start = int(time.time() * 1000) - int(last * ms_per_step)
    run = client.create_run(experiment_id, run_name=rec.name, start_time=start, tags={"source": SOURCE})
    # A point's time is its step's place in the training: MLflow's metric page plots against
    # relative time by default, and points logged at one instant would stack on a vertical line.
    metrics = [Metric(k, v, start + int(s * ms_per_step), s) for k, v, s in values]
    params = [Param(k, v) for k, v in params_of(rec).items()]
    tags = [RunTag(k, v) for k, v in tags_of(rec, digest).items()]
    for m, p, t in _batches(metrics, params, tags):
        client.log_batch(run.info.run_id, metrics=m, params=p, tags=t)
    client.set_terminated(run.info.run_id, "FINISHED", end_time=start + int(last * ms_per_step))
    return run.info.run_id


def _refresh(client: MlflowClient, run, tags: dict[str, str]) -> None:
    from mlflow.entities import RunTag

    changed = [RunTag(k, v) for k, v in tags.items() if run.data.tags.get(k) != v]
    for i in range(0, len(changed), 100):
        client.log_batch(run.info.run_id, tags=changed[i:i + 100])


def sync(client: MlflowClient, experiment_id: str, records: Sequence[Record],
         studies_read: Iterable[str] | None = None, log=print) -> Summary:
    """Bring the experiment's runs of record in line with `records` (see the module docstring).
    Imported runs of `studies_read` (default: the records' studies) whose record is gone are
    deleted."""
    done = Summary()
    existing = imported_runs(client, experiment_id)
    for i, rec in enumerate(records):
        digest = rec.digest
        tags = tags_of(rec, digest)
        old = existing.pop(rec.key, [])
        live = _live_run(client, experiment_id, rec)
        keep = None if live is not None else next(
            (r for r in old if r.data.tags.get("record_digest") == digest), None)
        for r in old:
            if r is not keep:
                client.delete_run(r.info.run_id)
        if live is not None:
            _refresh(client, live, {k: v for k, v in tags.items() if k != "mlflow.note.content"})
            done.live += 1
            done.ids[rec.key] = live.info.run_id
        elif keep is not None:
            _refresh(client, keep, tags)
            done.unchanged += 1
            done.ids[rec.key] = keep.info.run_id
        else:
            done.ids[rec.key] = log_record(client, experiment_id, rec, digest)
            done.replaced += bool(old)
            done.imported += not old
        if (i + 1) % 50 == 0:
            log(f"  {i + 1}/{len(records)} runs of record")
    read = set(studies_read) if studies_read is not None else {r.study for r in records}
    for key, runs in existing.items():
        if key.partition("/")[0] in read:
            for r in runs:
                client.delete_run(r.info.run_id)
                done.removed += 1
    return done


def comparison_note(experiment_id: str, records: Sequence[Record], ids: dict[str, str]) -> str:
    """Per study and task, a link to one chart of the task's headline held-out curve with every
    current run of record overlaid (stale runs left out, as in the report)."""
    from flows.mlflow_records import DEFAULT
    from tasks.tracking import HEADLINE_CURVES, comparison_link

    groups: dict[tuple[str, str], list[Record]] = {}
    for rec in records:
        task = labels(rec).get("task", "") if rec.seed is not None and not rec.run.stale else ""
        if task in HEADLINE_CURVES and rec.key in ids:
            groups.setdefault((rec.study, task), []).append(rec)
    lines = [NOTE_HEAD, "", "Filter the runs table with `tags.source = 'records'`; every seed of each "
             "method, stale runs (another base) left out:", ""]
    for (study, task), recs in sorted(groups.items(), key=lambda kv: (kv[0][0] != DEFAULT, kv[0])):
        metric = HEADLINE_CURVES[task]
        link = comparison_link(experiment_id, [ids[r.key] for r in recs], metric)
        methods = len({r.method for r in recs})
        lines.append(f"- [{study} study, {task}: `{metric}`, {len(recs)} runs of {methods} methods]({link})")
    return "\n".join(lines) + "\n"


def write_note(client: MlflowClient, experiment_id: str, text: str) -> None:
    """The experiment's description: its text before this section (the pipeline's saved
    comparison) kept, this section replaced."""
    old = client.get_experiment(experiment_id).tags.get("mlflow.note.content", "")
    kept = old.split(NOTE_HEAD, 1)[0].rstrip()
    client.set_experiment_tag(experiment_id, "mlflow.note.content", (kept + "\n\n" if kept else "") + text)
