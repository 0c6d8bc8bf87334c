"""The committed runs in the local MLflow store: `python -m flows.mlflow_records` (`make mlflow-ui`
runs it first), so a fresh clone's MLflow UI compares every run of record without training one.

What is a run of record: every (method, seed) the report finds (`flows/report_collect.py`,
`collect`) in the default study's `data/` and in each recorded study's `studies/<name>/data/`
(`tasks/studies.py`, `recorded`), and each study's base evaluation. Each becomes one MLflow run
of the lab's experiment (`tasks/tracking.py`: the same store and experiment as the live runs, so
the runs table's "Compare" overlays an imported run with any other), named as a live run is
(`<method>-seed<S>`, `<study>/<method>-seed<S>` outside the default study) and holding:

- params: its study, preset, method and seed, run.json's `config_hash`, and the md5 of each run
  file its stages read (`train.run_file_md5`, `evaluate.run_file_md5`: dvc.lock). The run files
  themselves (`data/runs/`, flows/configure.py) are not committed, only these fingerprints, so the
  resolved settings (`train.*`, `evaluate.*`) are logged only where HEAD's `configure` writes the
  very bytes the record fingerprints; a run recorded with other code or settings (`outdated`)
  keeps the fingerprints alone, never HEAD's settings in place of its own;
- metrics: its test evaluation (`test/<metric>`, metrics.json: the headline keys included), the
  training curve (train.json, TRL's names, by step), the held-out curve (`heldout/<metric>` by
  step, and the detector's `heldout/collapse/<kind>` flags rebuilt from run.json's events, as a
  live run logs them), the test split at each checkpoint (`test_curve/<metric>`, test.json), and
  run.json's numbers (`run/<key>`). MLflow names hold no `@` (`pass_at_1`), as live runs;
- tags: `source=records`, `study`, `preset`, `reward_method`, `seed`, `task`, `base` (its base's
  md5, `evals/lineage.py`), `stale` (trained from another base than its study's now: the report
  leaves it out), `outdated` (HEAD's code or settings would train it again), the lab's collapse
  labels (`collapse_label`: the held-out curve's, `collapse_label_test`: the test split's, the
  rules of `flows/alarms.py`), the detector's `collapsed` and `collapse.<kind>` (run.json),
  `headline_metrics` (the `test/...` names of its headline.json keys), `record_key` and
  `record_digest`.

What a run holds and the store's side (MlflowClient, log_batch) are `flows/mlflow_runs.py`.

Idempotent: a run is found again by `record_key` (`<study>/<method>/seed<S>`); one whose
`record_digest` (the record's files, the settings logged, this importer's version) is unchanged is
kept, its tags refreshed; a changed record replaces it (the old run is deleted); a run whose
record is gone is deleted. A run that this store logged live (its run.json names its MLflow run
id, `flows/train.py`) is not imported a second time: the live run gets the record's tags instead.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core import paths
from core.params import ROOT, Params
from evals.lineage import read_lock
from flows.mlflow_runs import Summary, comparison_note, sync, write_note
from flows.report_collect import RunData, collect, config_md5

# Bumped when what an imported run holds changes: every run is imported again.
IMPORT_VERSION = "1"
DEFAULT = "default"


@dataclass
class Record:
    """One run of record, as the records hold it."""

    study: str
    method: str
    seed: int | None
    preset: str
    run: RunData
    files: list[Path]
    root: Path
    base_metrics: dict | None = None
    run_files: dict = field(default_factory=dict)  # kind -> md5 of its run file (dvc.lock)
    settings: dict = field(default_factory=dict)   # {"train": ..., "evaluate": ...} proven by dvc.lock
    outdated: str = "unknown"                     # "true", "false" or "unknown" (nothing to judge by)

    @property
    def key(self) -> str:
        return f"{self.study}/{paths.run_key(self.method, self.seed)}"

    @property
    def name(self) -> str:
        from tasks.tracking import run_name

        return run_name(paths.run_key(self.method, self.seed).replace("/", "-"), self.study)

    @property
    def digest(self) -> str:
        h = hashlib.sha256(f"{IMPORT_VERSION}\0{self.key}\0".encode())
        for f in self.files:
            h.update(f.relative_to(self.root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
        h.update(json.dumps([self.run_files, self.settings], sort_keys=True).encode())
        return h.hexdigest()[:16]


# ------------------------------------------------------------------------------ the records

def studies(root: Path = ROOT, only: Sequence[str] = ()) -> list[tuple[str, Path, dict]]:
    """(name, data folder, study.json) of the default study and of every recorded study."""
    from tasks.studies import record_dir, recorded

    found: list[tuple[str, Path, dict]] = [(DEFAULT, Path(root) / "data", {})]
    found += [(name, record_dir(name, Path(root)) / "data", study)
              for name, study in recorded(Path(root)).items()]
    if only:
        unknown = sorted(set(only) - {name for name, _, _ in found})
        if unknown:
            raise LookupError(f"no recorded study {', '.join(unknown)} (recorded: "
                              f"{', '.join(name for name, _, _ in found)})")
        found = [s for s in found if s[0] in only]
    return found


def _files(data: Path, method: str, seed: int | None) -> list[Path]:
    """The record's files of a run, those that exist, in a fixed order."""
    under = Path(data)
    out = [under / "eval" / paths.run_key(method, seed) / f for f in ("headline.json", "metrics.json")]
    if seed is not None:
        out += [under / "plots" / paths.run_key(method, seed) / f"{f}.json" for f in ("train", "heldout", "test")]
        out.append(under / "checkpoints" / paths.run_key(method, seed) / "run.json")
    return [f for f in out if f.is_file()]


def read_records(root: Path = ROOT, only: Sequence[str] = ()) -> list[Record]:
    """Every run of record of the studies (all of them, or `only` those), bases included."""
    out: list[Record] = []
    with _digest_once():
        for name, data, study in studies(root, only):
            out += _study_records(Path(root), name, data, study)
    return out


def _study_records(root: Path, name: str, data: Path, study: dict) -> list[Record]:
    out: list[Record] = []
    preset = _default_preset(root) if name == DEFAULT else (study.get("preset") or DEFAULT)
    found = collect(data, folder="" if name == DEFAULT else f"studies/{name}")
    base = found.runs.get("base", {}).get(None)
    settings = StudySettings(Path(root), name, data.parent, study)
    for method, seeds in found.runs.items():
        for seed, run in seeds.items():
            rec = Record(name, method, seed, preset, run, _files(data, method, seed),
                         Path(root), base.metrics if base is not None else None)
            rec.run_files, rec.settings, rec.outdated = settings.of(method, seed)
            out.append(rec)
    return out


def _default_preset(root: Path) -> str:
    from core.params import read_raw

    try:
        return read_raw(Path(root) / "params.yaml").get("preset") or DEFAULT
    except (OSError, ValueError, AttributeError):
        return DEFAULT


class StudySettings:
    """A study's run settings as HEAD's `configure` writes them, checked against its dvc.lock."""

    def __init__(self, root: Path, name: str, folder: Path, study: dict) -> None:
        self.stages = read_lock(folder / "dvc.lock")
        self.params = _params(root, name, study) if self.stages else None
        self._configs: dict[str | None, tuple[dict, dict] | None] = {}

    def configs(self, method: str | None) -> tuple[dict, dict] | None:
        """{path: md5} and {path: settings} of `method`'s run files (None: the base's)."""
        if method not in self._configs:
            self._configs[method] = None if self.params is None else _configs(self.params, method)
        return self._configs[method]

    def recorded(self, method: str, seed: int | None) -> dict[str, str]:
        """kind (`train`, `evaluate`) -> the md5 of the run file the run's stage read (dvc.lock)."""
        kinds = ("evaluate",) if method == "base" else ("train", "evaluate")
        out = {}
        for kind in kinds:
            stage = ("evaluate_base" if method == "base" and seed is None else
                     f"evaluate_base_draw@{seed}" if method == "base" else
                     next((s for s in (f"{kind}@{method}-{seed}", f"{kind}_extra@{method}-{seed}")
                           if s in self.stages), ""))
            path = f"data/runs/{method}/{kind}.json"
            deps = (self.stages.get(stage) or {}).get("deps") or []
            md5 = next((d.get("md5") for d in deps if isinstance(d, dict) and d.get("path") == path), None)
            if isinstance(md5, str):
                out[kind] = md5
        return out

    def of(self, method: str, seed: int | None) -> tuple[dict, dict, str]:
        """(the run files' md5s dvc.lock records, the settings HEAD writes where they are the very
        bytes it recorded, outdated: "true", "false" or "unknown")."""
        recorded = self.recorded(method, seed)
        want = self.configs(None if method == "base" else method)
        kinds = 1 if method == "base" else 2
        if want is None or len(recorded) < kinds:
            return recorded, {}, "unknown"
        md5s, configs = want
        proven = {kind: configs[path] for kind, md5 in recorded.items()
                  if md5s.get(path := f"data/runs/{method}/{kind}.json") == md5}
        return recorded, proven, "false" if len(proven) == kinds else "true"


def _params(root: Path, name: str, study: dict) -> Params | None:
    """The params HEAD resolves for a study (None where they no longer validate)."""
    from core.params import load, validate

    try:
        if name == DEFAULT:
            return load(Path(root) / "params.yaml")
        from evals.claims import parse_study
        from tasks.studies import study_params

        preset, base_seed = parse_study(name)
        raw = study_params(Path(root), preset or None, list(study.get("methods") or []), base_seed)
        return validate(raw, f"studies/{name}", preset or None)
    except Exception:  # noqa: BLE001 - a preset since removed: its settings are not judged
        return None


def _configs(params: Params, method: str | None) -> tuple[dict, dict] | None:
    from flows import configure

    try:
        name = method or "base"
        configs = {f"data/runs/{name}/evaluate.json": configure.evaluate_config(params, method)}
        if method is not None:
            configs[f"data/runs/{name}/train.json"] = configure.train_config(params, method)
    except Exception:  # noqa: BLE001 - a method the params no longer define: nothing to prove
        return None
    return {p: config_md5(c) for p, c in configs.items()}, configs


@contextlib.contextmanager
def _digest_once() -> Iterator[None]:
    """Every study asks `configure` for the same import closures: digest each once while the
    records are read (the files do not change meanwhile), as the report does
    (`report_collect.outdated_runs`)."""
    from flows import configure

    digest = configure.code_digest
    cache: dict[tuple[str, ...], str] = {}

    def once(entries: Iterable[str], root: Path = ROOT) -> str:
        if root != ROOT:
            return digest(entries, root)
        key = tuple(entries)
        if key not in cache:
            cache[key] = digest(list(key))
        return cache[key]

    configure.code_digest = once
    try:
        yield
    finally:
        configure.code_digest = digest


def import_records(root: Path = ROOT, only: Sequence[str] = (), log=print) -> Summary:
    """Read the records under `root` and sync them into the lab's MLflow store and experiment."""
    from mlflow.tracking import MlflowClient

    from tasks import tracking

    records = read_records(root, only)
    tracking.setup()
    client = MlflowClient()
    exp = client.get_experiment_by_name(os.environ["MLFLOW_EXPERIMENT_NAME"])
    assert exp is not None  # tracking.setup() creates it
    with _lock(tracking.tracking_uri()):
        done = sync(client, exp.experiment_id, records, [s for s, _, _ in studies(root, only)], log)
        write_note(client, exp.experiment_id, comparison_note(exp.experiment_id, records, done.ids))
    return done


@contextlib.contextmanager
def _lock(uri: str) -> Iterator[None]:
    """One import at a time per store (two at once would each create the missing runs): a lock
    file beside a sqlite store, else in the checkout's mlflow/."""
    folder = Path(uri.removeprefix("sqlite:///")).parent if uri.startswith("sqlite:///") else ROOT / "mlflow"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".records.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def main(argv: list[str] | None = None) -> None:
    from core.cli import run_main
    from tasks import tracking

    p = argparse.ArgumentParser(description="Import every committed run (data/, studies/<name>/data/) "
                                "into the local MLflow store, idempotently (flows/mlflow_records.py).")
    p.add_argument("--study", action="append", default=[], metavar="NAME",
                   help=f"only this study (`{DEFAULT}` or a name under studies/); repeatable")
    args = p.parse_args(argv)

    def go() -> None:
        start = time.monotonic()
        print(f"MLflow store: {tracking.tracking_uri()}", flush=True)
        done = import_records(ROOT, args.study)
        print(f"{done.line()} ({time.monotonic() - start:.0f} s)")
        print(f"runs table: {tracking.experiment_url()}")

    run_main(go)


if __name__ == "__main__":
    main(sys.argv[1:])
