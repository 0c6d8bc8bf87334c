"""Which base each run started from, and whether it is a run of the study's current base.

A number is never pooled across bases: the report's tables and the claims read only runs of the
study's current base, and name the others ("stale") on the first screen. Where each run's base
comes from, in order:

1. `dvc.lock` beside the study's `data/` (the default study's at the repository root,
   studies/<preset>/dvc.lock for a preset's): the `train@<method>-<seed>` stage's (or, for a
   seed the claims' plan added, `train_extra@<method>-<seed>`'s) dependency on
   `data/base_model` (its DVC md5), against the base `build_base` last wrote (its output's md5).
   DVC's record is in git, so this works in a fresh clone. A run is **stale** when it trained from
   another base, when its evaluation is of another training (`evaluate@...`'s checkpoint md5
   differs from `train@...`'s output), or when its committed metrics.json is not the file the
   lock records (written by some other run);
2. `run.json`'s `base_model_md5` (flows/train.py records it, the same DVC md5 of the base's
   folder), where the run has no lock entry: compared with the lock's current base, or with the
   md5 of `data/base_model/` when that folder exists;
3. neither: the run's base is **unrecorded** and its group is the study's folder
   (`unrecorded:data`, `unrecorded:studies/hint_copier`): runs of one folder are taken to share a
   base, which is all the committed runs that predate these records can say.

`dir_md5` computes DVC's directory hash (md5 of the sorted `{"md5", "relpath"}` list, `.dir`
appended), so run.json and dvc.lock name a base by the same string.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from core.paths import run_key

BASE_DIR = "data/base_model"


def file_md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dir_md5(folder: Path) -> str:
    """DVC's md5 of a directory: md5 of the JSON list of its files' md5 and relative paths,
    sorted by path, with `.dir` appended (dvc_data.hashfile.tree.Tree.digest)."""
    folder = Path(folder)
    entries = sorted(({"md5": file_md5(p), "relpath": p.relative_to(folder).as_posix()}
                      for p in folder.rglob("*") if p.is_file()), key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


@dataclass(frozen=True)
class Lineage:
    """A run's base (`md5:<hash>` or `unrecorded:<folder>`) and why it is stale ("" if current)."""

    base: str
    stale: str = ""


def _md5_of(entries, path: str) -> str | None:
    for e in entries or ():
        if isinstance(e, dict) and e.get("path") == path:
            return e.get("md5")
    return None


def read_lock(lock: Path) -> dict:
    """The `stages` mapping of a dvc.lock ({} when there is none or it cannot be read).

    Read-only: one parse per content is shared by every caller. A report reads each study's
    lock many times (lineages, outdated runs, shipped bases), and a dvc.lock of the study of
    record is megabytes of YAML: pure-Python PyYAML took seconds per parse, so this parses with
    libyaml where PyYAML has it and keeps the last few parses, keyed by the file's bytes (an
    edited lock is parsed again)."""
    try:
        text = Path(lock).read_bytes()
    except OSError:
        return {}
    return _parse_lock(text)


@functools.lru_cache(maxsize=16)
def _parse_lock(text: bytes) -> dict:
    try:
        raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return {}
    return raw.get("stages", {}) if isinstance(raw, dict) and isinstance(raw.get("stages"), dict) else {}


class Lineages:
    """The lineage of every run under one study's `data/` folder (see the module docstring)."""

    def __init__(self, data_dir: Path, folder: str = "") -> None:
        self.data_dir = Path(data_dir)
        self.root = self.data_dir.parent
        self.folder = folder or self.data_dir.name
        self.stages = read_lock(self.root / "dvc.lock")
        built = self.stages.get("build_base", {})
        self.current = _md5_of(built.get("outs"), BASE_DIR) if isinstance(built, dict) else None
        if self.current is None and (self.data_dir / "base_model").is_dir():
            self.current = dir_md5(self.data_dir / "base_model")

    def _stage(self, kind: str, method: str, seed: int | None) -> dict:
        """The lock's entry of a run's stage: `train@m-s` for a seed of `seeds`, `train_extra@m-s`
        for one the claims' plan added (params `extra_runs`); {} when there is none."""
        names = ([f"{kind}_base"] if method == "base" and seed is None
                 else [f"{kind}_base_draw@{seed}"] if method == "base"
                 else [f"{kind}@{method}-{seed}", f"{kind}_extra@{method}-{seed}"])
        got = next((self.stages[n] for n in names if isinstance(self.stages.get(n), dict)), {})
        return got

    def _matches(self, stage: dict, rel: str) -> bool | None:
        """Whether the committed file `rel` (under the study root) is the one the stage's outs
        record; None when the stage does not record it or the file is absent."""
        want = _md5_of(stage.get("outs"), rel)
        path = self.root / rel
        if want is None or not path.is_file():
            return None
        return file_md5(path) == want

    def of(self, method: str, seed: int | None, run_json: dict | None = None) -> Lineage:
        """The lineage of run (method, seed) (`base`, seed None: the base's evaluation; `base`,
        seed d: its draw d, params `base_draws`)."""
        unrecorded = Lineage(f"unrecorded:{self.folder}")
        where = f"data/eval/{run_key(method, seed)}"
        evaluate = self._stage("evaluate", method, seed)
        if method == "base":
            started = _md5_of(evaluate.get("deps"), BASE_DIR)
        else:
            train = self._stage("train", method, seed)
            started = _md5_of(train.get("deps"), BASE_DIR)
            recorded = (run_json or {}).get("base_model_md5")
            if started is None:
                started = recorded if isinstance(recorded, str) else None
            elif isinstance(recorded, str) and recorded != started:
                return Lineage(f"md5:{recorded}", "its run.json and dvc.lock name different bases")
            if train and evaluate:
                trained = _md5_of(train.get("outs"), f"data/checkpoints/{method}/seed{seed}/final")
                evaluated = _md5_of(evaluate.get("deps"), f"data/checkpoints/{method}/seed{seed}/final")
                if trained and evaluated and trained != evaluated:
                    return Lineage(f"md5:{started}", "its evaluation is of another training (dvc.lock)")
        if started is None:
            if self.stages and self.current:
                return Lineage(unrecorded.base, "dvc.lock has no record of the base it started from")
            return unrecorded
        if self.current and started != self.current:
            return Lineage(f"md5:{started}", f"trained from base {started[:8]}, the study's base is now "
                                             f"{self.current[:8]} (dvc.lock)")
        if evaluate and self._matches(evaluate, f"{where}/metrics.json") is False:
            return Lineage(f"md5:{started}", "its metrics.json is not the file dvc.lock records")
        return Lineage(f"md5:{started}")
