"""The report's table of arith pass@1 on the leaked and on the clean test items, apart.

Contamination in miniature (preset `leaked`, docs/bases.md): a base whose SFT replays a share of
the arith test items with their worked answers (`arith_leak`; which items by a hash of their id,
models/tiny.py `is_leaked`) can score on those items by memory. Its pooled pass@1 mixes the two
kinds of item, so for every study whose base leaks this table gives each run's (the base, its
draws, every trained seed) mean arith pass@1 on the leaked items and on the clean ones, their
difference and how many items each mean is over, read from the run's items.json
(evals/items.py). A study whose base does not leak is not listed: every item of it is clean.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from statistics import mean
from typing import Any

from core import paths
from core.params import ROOT, Params
from evals.claims import parse_study, study_of
from evals.items import item_scores
from flows.report_format import _fmt, _markdown, _signed, html_table
from models.tiny import LEAK_SHARE, is_leaked, leaks

BENCH, METRIC = "arith", "pass@1"
HEADER = ["run", "pass@1 leaked", "pass@1 clean", "leaked − clean", "n leaked / n clean"]
EXPLAIN = ("Each run of a study whose base saw a share of the arith test items with their answers "
           "in its SFT (arith_leak: preset leaked, docs/bases.md): its arith pass@1 on those leaked "
           "items and on the clean ones apart, from its items.json; the clean items alone measure "
           "the task untouched by the leak.")
NO_LEAK = "No study's base leaks yet (preset leaked, docs/bases.md)."
NO_ITEMS = "No run of a study whose base leaks has arith per-item scores (items.json) yet."


def leak_split(items: dict, share: float = LEAK_SHARE, where: str = "items.json") -> dict | None:
    """Mean arith pass@1 over the leaked ids and over the clean ids of one run's items.json, and
    how many ids each is over: {"leaked", "clean", "n_leaked", "n_clean"} (a mean is None over
    no item). None when the run has no arith benchmark (or no pass@1 for it). Rows whose pass@1 is
    null are left out, as `evals.items.item_scores` leaves them. A malformed entry (ids and values
    of different lengths, a value not a number) raises a one-line ValueError naming `where`.

    >>> items = {"arith": {"headline": "pass@1", "ids": ["a", "b"], "metrics": {"pass@1": [1.0, 0.5]}}}
    >>> leak_split(items, share=1.0)
    {'leaked': 0.75, 'clean': None, 'n_leaked': 2, 'n_clean': 0}
    >>> leak_split({"facts": items["arith"]}) is None
    True
    """
    scores = item_scores(items, f"{BENCH}/{METRIC}", where)
    if scores is None:
        return None
    leaked = [v for i, v in scores.items() if is_leaked(i, share)]
    clean = [v for i, v in scores.items() if not is_leaked(i, share)]
    return {"leaked": mean(leaked) if leaked else None, "clean": mean(clean) if clean else None,
            "n_leaked": len(leaked), "n_clean": len(clean)}


def base_leaks(params: Params) -> bool:
    """Whether the base these params build saw leaked test items in its SFT: a `leaks` mix in
    either phase, on a tiny base built here (a `base_model.path` checkpoint is not trained by the
    lab, so its mixes teach it nothing; flows/premises.py reads it alike)."""
    sft = params.base_model.sft
    return not params.base_model.path and leaks([sft.mix, sft.roles.mix if sft.roles else {}])


def _study_params(study: str, root: Path) -> Params:
    """The params a recorded study ran with (tasks/studies.py `study_params`, validated under
    its preset), `study` a record's name (`leaked`, a second base's `leaked.seed1`)."""
    from core.params import validate
    from tasks.studies import recorded, study_params

    preset, base_seed = parse_study(study)
    methods = list((recorded(root).get(study) or {}).get("methods") or [])
    raw = study_params(root, preset or None, methods, base_seed)
    return validate(raw, f"studies/{study}", preset or None)


def leaking_studies(runs: Mapping[str, Any], params: Params | None = None, root: Path = ROOT) -> set[str]:
    """The studies among the runs' names (`""` the default study, else a record's name as in
    `<study>/<arm>`) whose base leaks (`base_leaks`). The default study is judged by `params`
    (the report's), else `root`'s params.yaml; a recorded study by its preset's params. A study
    whose params cannot be read (a preset since removed, no params.yaml under `root`) is not
    judged: it is not listed."""
    from core.params import load

    out = set()
    for study in dict.fromkeys(study_of(name) for name in runs):
        try:
            p = (params if params is not None else load(Path(root) / "params.yaml")) if study == "" \
                else _study_params(study, Path(root))
        except (OSError, ValueError):
            continue
        if base_leaks(p):
            out.add(study)
    return out


def _cell(value: float | None) -> str:
    return "—" if value is None else _fmt(value)


def leak_rows(runs: Mapping[str, Mapping[int | None, Any]],
              leaking: Collection[str]) -> tuple[list[list[str]], list[str]]:
    """(rows, notes). A row per run of a study in `leaking` (`leaking_studies`) with arith
    per-item scores: [run (as the report names it: `leaked/rlvr/seed0`, `leaked/base`,
    `leaked/base/draw1`), pass@1 on the leaked items, on the clean items, leaked − clean, `n
    leaked / n clean`]; "—" for a mean over no item. Runs in the order given, the base's own
    evaluation before its draws and seeds ascending. Stale runs (`RunData.stale`) are left out, as
    from every table of the report; a run without items.json or without arith is not listed (only
    what is measured); a malformed items.json becomes a note naming the run, never a row.

    >>> from types import SimpleNamespace as Run
    >>> items = {"arith": {"ids": ["a", "b"], "metrics": {"pass@1": [1.0, 0.5]}}}
    >>> leak_rows({"leaked/base": {None: Run(items=items, stale="")}, "rlvr": {0: Run(items=items, stale="")}},
    ...           {"leaked"})[0][0][0]
    'leaked/base'
    """
    rows: list[list[str]] = []
    notes: list[str] = []
    for method, seeds in runs.items():
        if study_of(method) not in leaking:
            continue
        for seed, run in sorted(seeds.items(), key=lambda x: (x[0] is not None, x[0] or 0)):
            items = getattr(run, "items", None)
            if items is None or getattr(run, "stale", ""):
                continue
            name = paths.run_key(method, seed)
            try:
                split = leak_split(items, where=f"{name}: items.json")
            except ValueError as e:
                notes.append(str(e))
                continue
            if split is None:
                continue
            gap = (None if split["leaked"] is None or split["clean"] is None
                   else _signed(split["leaked"] - split["clean"]))
            rows.append([name, _cell(split["leaked"]), _cell(split["clean"]), gap or "—",
                         f"{split['n_leaked']} / {split['n_clean']}"])
    return rows, notes


def leak_markdown(runs: Mapping[str, Mapping[int | None, Any]], leaking: Collection[str]) -> str:
    """The section for summary.md: the explanation and the table, or one line when nothing is
    measured; the malformed files after it."""
    if not leaking:
        return NO_LEAK
    rows, notes = leak_rows(runs, leaking)
    parts = [EXPLAIN, _markdown(HEADER, rows)] if rows else [NO_ITEMS]
    return "\n\n".join(parts + [f"Unreadable: {n}" for n in notes])


def leak_html(runs: Mapping[str, Mapping[int | None, Any]], leaking: Collection[str]) -> str:
    """The section's body for index.html: a sentence and the table (`leak_rows`), or one line
    when no study's base leaks (or none of its runs has arith per-item scores); the malformed
    files after it. Every text is escaped."""
    from html import escape

    if not leaking:
        return f"<p>{escape(NO_LEAK)}</p>"
    rows, notes = leak_rows(runs, leaking)
    out = (f"<p class='muted'>{escape(EXPLAIN)}</p>" + html_table(HEADER, rows)) if rows \
        else f"<p>{escape(NO_ITEMS)}</p>"
    return out + "".join(f"<p class='muted'>Unreadable: {escape(n)}</p>" for n in notes)
