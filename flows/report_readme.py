"""`make results` (`python -m flows.report --readme README.md`): the README's generated blocks, from
the committed records (data/, studies/, dvc.lock, reports/times/), each between its markers:

- `run` (beside `make run`): what `make run` trains (params `pipeline.quick`), how long it took
  here (reports/times/quick.json) and what a fresh clone trains again, and why (`run_markdown`);
- `results`: the first screen's answer as one table (`results_markdown`): the methods grouped by
  what they read, label-free first, each group ranked with its best ★ and the methods the claims'
  test cannot separate from it ≈, the ceiling, the base as the floor, the lab's collapse label and
  the detector's alarms, under the one line of bookkeeping;
- `claims`: one line per claim (its premise on the base compactly) and the runs still needed
  (`claims_readme`).
"""

from __future__ import annotations

import configparser
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from core import paths
from core.io import read_json
from core.params import Params, load
from evals.claims import TEST_ITEMS, verdicts
from flows import alarms as alarms_
from flows.report_answer import RECORDS_ANCHOR, records_markdown
from flows.report_claims import _interval, premise_readme, runs_needed, second_base_cell
from flows.report_collect import (
    Collected,
    outdated_stages,
    run_file_md5s,
)
from flows.report_format import _markdown, _signed, cell
from flows.report_rank import (
    COLLAPSE_LABEL,
    GROUPS,
    LABEL_FREE,
    TaskResult,
    Use,
    collapse_config,
    gather,
    headline,
    uses_for,
)

README_BEGIN = "<!-- results:begin (python -m flows.report --readme README.md) -->"
README_END = "<!-- results:end -->"
# The README's second generated block: the claims table and the collapse label's counts.
CLAIMS_BEGIN = "<!-- claims:begin (python -m flows.report --readme README.md) -->"
CLAIMS_END = "<!-- claims:end -->"
# The third, beside `make run`: what it trains, what it took here, what a fresh clone retrains.
RUN_BEGIN = "<!-- run:begin (python -m flows.report --readme README.md) -->"
RUN_END = "<!-- run:end -->"
TIMES = Path("reports") / "times" / "quick.json"  # under the repository root: what `make run` recorded


# ------------------------------------------------------------------------------ results

def _name(r, res: TaskResult) -> str:
    mark = (" ★" if res.best.get(r.group) == r.method else " ≈" if r.test is not None and r.test.tied
            else "")
    return f"`{r.method}`{mark}" + (" ceiling" if r.method == res.ceiling else "")


def readme_table(results: Sequence[TaskResult]) -> str:
    """The results table: a row per trained method, grouped by what it reads (label-free first),
    within a group by task, ranked; the task's headline metrics (named in `floor_line`)."""
    header = ["method", "reads", "task", "headline (mean ± std)", "vs base", "seeds", "collapsed", "alarms"]
    rows = []
    for group in GROUPS:
        members = [(res, r) for res in results for r in res.trained() if r.group == group]
        if not members:
            continue
        rows.append([f"**{group}**", *[""] * (len(header) - 1)])
        for res, r in members:
            metrics = [m for m in res.metrics if m in r.stats]
            if not metrics:
                continue
            base = next((b.stats for b in res.rows if b.base), {})
            n = max(r.stats[m]["n"] for m in metrics)
            c = r.collapse
            rows.append([_name(r, res), r.use.text(), res.task,
                         " / ".join(cell(r.stats[m], n) for m in metrics),
                         " / ".join(_signed(r.stats[m]["mean"] - base[m]["mean"]) if m in base else "—"
                                    for m in metrics), str(n),
                         c.cell() if c else "—", c.alarm_cell() if c else "—"])
    return _markdown(header, rows)


def floor_line(results: Sequence[TaskResult]) -> str:
    """Each task's headline metrics and the floor: `Headline and floor (the base, before training):
    arith pass@1 0.357; facts coverage 0.606.`"""
    parts = []
    for res in results:
        base = next((b.stats for b in res.rows if b.base), {})
        names = " / ".join(m.split("/", 1)[1] for m in res.metrics)
        values = " / ".join(cell(base[m], 1) if m in base else "—" for m in res.metrics)
        parts.append(f"{res.task} {names} {values}")
    return f"Headline metric and floor (the base, before training): {'; '.join(parts)}." if parts else ""


def results_markdown(agg: dict[str, dict], collected: Collected, data_dir: Path,
                     params: Params | None = None, left_out: Sequence[str] = (),
                     outdated: Mapping[str, Mapping[str, int]] | None = None,
                     alarms: Mapping | None = None, results: Sequence[TaskResult] | None = None,
                     link: str = f"reports/summary.md#{RECORDS_ANCHOR}") -> str:
    """The README's results block: the one line of bookkeeping (the stale runs left out, the runs
    recorded before a change to their code; listed in reports/summary.md), the table, the floor,
    what its marks and collapse columns mean (with the detector's measured rates) and the base's
    self-evaluation AUROC."""
    if results is None:
        results = headline(collected, agg, data_dir, params, alarms)
    if alarms is None:
        alarms = alarms_.score(collected, collapse_config(params))
    lines = [readme_table(results), ""]
    if floor := floor_line(results):
        lines += [floor, ""]
    runs, collapsed, healthy = alarms_.label_counts(alarms)
    lines.append(f"★ the best of its group on its task; ≈ one the claims' test ({TEST_ITEMS}, 95%) "
                 "cannot separate from it; ceiling: the best label reader. Collapsed: seeds the lab's "
                 f"collapse label, the {COLLAPSE_LABEL} (`flows/alarms.py`), calls collapsed; alarms: "
                 f"seeds the detector (`models/collapse.py`) fires on. Over all {runs} current runs "
                 f"({collapsed} collapsed, {healthy} healthy) it {alarms_.detector_rates(alarms)}.")
    auroc = agg.get("base", {}).get("self_eval/auroc_q0")
    if auroc:
        lines.append(f"\nBase self-evaluation AUROC (`self_eval/auroc_q0`): {cell(auroc, 1)}.")
    if line := records_markdown(left_out, outdated or {}, link):
        lines[0:0] = [line, ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ make run

def run_cost_line(times: Path) -> str:
    """The README's line on what `make run` cost here, from the times the pipeline recorded
    (flows/pipeline.py `write_times`); nothing before a `make run` was recorded."""
    if not times.exists():
        return ""
    t = read_json(times)
    ran = {s: v for s, v in t["stages"].items() if v["action"] not in ("skip", "not run")}
    longest = max(ran.items(), key=lambda kv: kv[1]["seconds"] or 0, default=None)
    return (f"\n\n`make run` took {t['wall_seconds'] / 60:.0f} min here ({t['machine']['cores']} cores, "
            f"up to {t['max_parallel']} stages at once; {len(ran)} of {len(t['stages'])} stages ran, the "
            "rest up to date"
            + (f"; the longest, `{longest[0]}`, {longest[1]['seconds'] / 60:.0f} min" if longest else "")
            + f"): `{_relative(times)}`.")


def _relative(path: Path) -> str:
    """`path` as the README names it: from the repository root when it lies under it."""
    try:
        return str(Path(path).resolve().relative_to(paths.ROOT))
    except ValueError:
        return str(path) if not Path(path).is_absolute() else Path(path).name


def _listed(names: Sequence[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def _git_tracked(root: Path, path: str) -> bool:
    try:
        out = subprocess.run(["git", "ls-files", "--", path], cwd=root, capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def dvc_remotes(root: Path) -> list[str]:
    """The DVC remotes a fresh clone has: `.dvc/config`'s `remote "<name>"` sections, which
    `dvc remote add` writes single-quoted (`['remote "store"']`; config.local is not in git)."""
    config = configparser.ConfigParser()
    try:
        config.read(Path(root) / ".dvc" / "config")
    except configparser.Error:
        return []
    names = (s.strip("'") for s in config.sections())
    return [s.split('"')[1] for s in names if s.startswith("remote ") and s.count('"') >= 2]


def fresh_clone_text(root: Path, params: Params, methods: Sequence[str], seeds: Sequence[int]) -> str:
    """What a fresh clone's `make run` trains again, and why: the trained weights ship neither in
    git nor (without a DVC remote) anywhere else; which of them, and whether the base's evaluation,
    were recorded before a change to their code or settings (their run file in dvc.lock is not
    HEAD's), so that a fresh run's numbers may differ from the records."""
    runs = [(m, s) for m in methods for s in seeds]
    shipped = [(m, s) for m, s in runs if _git_tracked(root, f"data/checkpoints/{m}/seed{s}/final")]
    remotes = dvc_remotes(root)
    missing = len(runs) - len(shipped)
    if not missing:
        text = "A fresh clone has their weights in git and trains none again"
    elif remotes:
        text = (f"A fresh clone pulls the weights of {missing} with `dvc pull` (remote "
                f"`{remotes[0]}`), else trains them again")
    else:
        text = (f"A fresh clone trains {'all ' if not shipped else ''}{missing} again: no checkpoint ships "
                "(`data/checkpoints/` is DVC's, not git's, and `.dvc/config` names no remote)")
    lock = Path(root) / "dvc.lock"
    if lock.is_file():
        try:
            changed = set(outdated_stages(lock, run_file_md5s(params, methods)))
        except Exception:  # noqa: BLE001 - a lock or method HEAD cannot judge: say nothing of it
            changed = set()
        old = sum(f"train@{m}-{s}" in changed for m, s in runs)
        who = ([f"{'all ' if old == len(runs) and old > 1 else ''}{old} of them"] if old else []) + (
            ["the base's evaluation"] if "evaluate_base" in changed else [])
        if who:
            one = len(who) == 1 and old <= 1
            text += (f"; {' and '.join(who)} {'was' if one else 'were'} recorded before a change to "
                     "their code or settings, so a fresh run's numbers may differ from the records")
    return text + "."


def run_markdown(params: Params, root: Path = paths.ROOT, times: Path | None = None,
                 uses: Mapping[str, Use] | None = None) -> str:
    """The README's block beside `make run`: the methods it trains (params `pipeline.quick`, the
    label-free among them), its seeds, what it took here, and what a fresh clone trains again."""
    quick = params.pipeline.quick
    methods, seeds = list(quick.methods), list(quick.seeds)
    free = [m for m in methods if uses is not None and m in uses and uses[m].group == LABEL_FREE]
    text = (f"`make run` trains {_listed(methods)} (params.yaml `pipeline.quick`"
            + (f"; label-free among them: {_listed(free)}" if free else "")
            + f") with seed{'s' * (len(seeds) != 1)} {', '.join(map(str, seeds))}, then evaluates them "
            "and writes the report.")
    times = times if times is not None else Path(root) / TIMES
    if cost := run_cost_line(times).strip():
        text += " " + cost.replace("`make run` took", "It took", 1)
    return text + " " + fresh_clone_text(Path(root), params, methods, seeds)


# ------------------------------------------------------------------------------ the blocks

def update_readme(readme: Path, text: str, begin: str = README_BEGIN, end: str = README_END) -> None:
    """Replace what stands between the markers `begin` and `end` of `readme` with `text`."""
    page = Path(readme).read_text(encoding="utf-8")
    head, sep, rest = page.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        what = {README_BEGIN: "results", CLAIMS_BEGIN: "claims", RUN_BEGIN: "make run"}.get(begin, begin)
        raise LookupError(f"{readme} has no {what} section: add the lines {begin} and {end} where "
                          "the text goes")
    Path(readme).write_text(f"{head}{begin}\n{text}\n{end}{tail}", encoding="utf-8")


def claims_readme(every: Collected) -> str:
    """The README's claims block, one line per claim (the front page stays short: the full table,
    with settings, preconditions and what each undecided claim needs, is the report's and
    `reports/claims.json`'s), its premise compactly (`premise_readme`: ✓ holds, ✗ fails with the
    threshold, `not measured`; empty for a claim without one), then the runs still needed. The
    collapse label's counts are the results block's, once."""
    found, _ = verdicts(every.runs)
    rows = []
    for v in found:
        c = v.claim
        diff = "; ".join(i.replace(" (no interval before the planned seeds)", "")
                         for x in v.comparisons if (i := _interval(x)) != "—") or "—"
        second = second_base_cell(v)
        rows.append([f"`{c.id}`", f"{c.paper} {c.figure}", diff.replace("|", "\\|"),
                     f"**{v.verdict}**", second[0],
                     # No premise: the cell is left out (markdown fills a short row), 3 bytes a row.
                     *([p] if (p := premise_readme(v)) else [])])
    # Short words: the README stays under 10 KB (tests/test_doc_commands.py).
    parts = [_markdown(["claim", "paper", "difference [95% CI]", "verdict", "second base", "premise"],
                       rows)]
    if needed := runs_needed(found):
        # The commands themselves are the report's (reports/summary.md): with a study per
        # engineered base they no longer fit the front page, nor does one of them as an example.
        parts.append(f"Still needed for a verdict (seeds by the power rule; a second base's pilot "
                     f"first): {len(needed)} pipeline calls, each in "
                     "[reports/summary.md](reports/summary.md#the-papers-claims).")
    return "\n\n".join(parts)


def write_readme(readme: Path, data_dir: Path = paths.DATA, params: Params | None = None) -> None:
    """`make results`: the README's generated blocks from the committed records (data/, studies/,
    dvc.lock, reports/times/): beside `make run`, the results table of the current base's runs,
    and the claims block. Stale runs are left out of every block (the collapse label's counts
    included)."""
    params = params if params is not None else load()
    root = Path(data_dir).parent
    rec = gather(Path(data_dir), params, params.methods)
    uses = uses_for(params.pipeline.quick.methods, params, notes=rec.collected.notes)
    text = results_markdown(rec.agg, rec.collected, data_dir, params, rec.left_out, rec.outdated,
                            rec.alarms, rec.results)
    update_readme(readme, run_markdown(params, root, uses=uses), RUN_BEGIN, RUN_END)
    update_readme(readme, text)
    update_readme(readme, claims_readme(rec.every), CLAIMS_BEGIN, CLAIMS_END)
