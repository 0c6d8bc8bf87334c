"""Bad input to the pipeline is refused before any stage runs, in one line naming the bad value
and the valid choices: the command line (`python -m flows.pipeline`, `--dry-run` included), a
Prefect deployment's parameters (the `pipeline` and `study` flows check theirs first) and the
files params.yaml names (a benchmark or data file missing fails here, not at `evaluate` after the
trainings). Every check raises `core.params.ParamsError`, which the command line prints as
`error: ...` with exit 2 and a flow run fails with at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection
from pathlib import Path

from core.params import ROOT, Params, ParamsError, load, split_benchmark_spec
from flows.pipeline_schedule import _MATRIX, select

EXECUTORS = ("local", "pool")


def missing_files(params: Params, root: Path = ROOT) -> list[str]:
    """The files params names that are not there, one line each: an external benchmark of
    `eval.benchmarks` (`gsm8k:<path>`), `data.external`'s train and test files when
    `data.source` is external, `base_model.path` when set. Relative paths are the repository's."""
    def absent(path: str | Path) -> bool:
        p = Path(path)
        return not (p if p.is_absolute() else Path(root) / p).exists()

    out = []
    for spec in params.eval.benchmarks:
        name, path = split_benchmark_spec(spec)
        if path is not None and absent(path):
            out.append(f"eval.benchmarks: {spec}: no file {path}")
    if params.data.source == "external":
        for key in ("train", "test"):
            path = getattr(params.data.external, key)
            if absent(path):
                out.append(f"data.external.{key}: no file {path} (docs/own_data.md says what goes there)")
    if params.base_model.path and absent(params.base_model.path):
        out.append(f"base_model.path: no model folder {params.base_model.path}")
    return out


def check_files(params: Params, root: Path = ROOT, where: str = "params.yaml") -> None:
    missing = missing_files(params, root)
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ParamsError(f"{where}{' preset ' + params.preset if params.preset else ''}: "
                          f"{missing[0]}{more}")


def check_pipeline(params: Params, graph: dict[str, set[str]], *, methods: list[str] | None = None,
                   seeds: list[int] | None = None, stages: list[str] | None = None,
                   executor: str | None = None, max_parallel: int | None = None,
                   retries: int | None = None, stage_timeout_s: float | None = None,
                   threads_per_stage: int | None = None, leave_out: Collection[str] | None = None,
                   root: Path = ROOT) -> None:
    """The `pipeline` flow's parameters (and the command line's) against the DAG and params:
    methods, seeds and stages that have a DVC stage, an executor that exists, counts that can
    run, and the files params names."""
    if executor is not None and executor not in EXECUTORS:
        raise ParamsError(f"executor {executor!r} is not one of: {', '.join(EXECUTORS)}")
    for name, value, least in (("max_parallel", max_parallel, 1), ("threads_per_stage", threads_per_stage, 1),
                               ("retries", retries, 0), ("stage_timeout_s", stage_timeout_s, 1)):
        if value is not None and value < least:
            raise ParamsError(f"{name} {value}: give {least} or more")
    known = sorted({m["method"] for s in graph if (m := _MATRIX.match(s))})
    strange = sorted(set(leave_out or ()) - set(known))
    if strange:
        raise ParamsError(f"leave_out {strange} have no DVC stage (stages exist for: {', '.join(known)})")
    select(graph, methods, seeds, stages)  # unknown methods, seeds and stages, each named
    check_files(params, root)


def check_study(name: str, methods: list[str] | None = None, seeds: list[int] | None = None,
                root: Path = ROOT) -> None:
    """A study's name (a preset that names arms, or `<study>.seed<N>`), the arms and seeds picked
    from it, and the files its params name."""
    from evals.claims import parse_study
    from tasks import studies

    arms, pilot = studies.study_arms(name, root)  # an unknown preset is named with the known ones
    if methods and not set(methods) <= set(arms):
        raise ParamsError(f"--methods {sorted(set(methods) - set(arms))} are not arms of the study "
                          f"{name}; its arms: {arms}")
    extra = studies.recorded_extra_runs(studies.record_dir(name, root), arms, pilot)
    have = sorted({*pilot, *(r["seed"] for r in extra.values())})
    if seeds and not set(seeds) <= set(have):
        raise ParamsError(f"--seeds {sorted(set(seeds) - set(have))} are not seeds of the study "
                          f"{name}; its seeds: {', '.join(map(str, have))}")
    preset = parse_study(name)[0]
    check_files(load(root / "params.yaml", preset=preset or None), root)


def check_command_line(args: argparse.Namespace, root: Path = ROOT) -> None:
    """Everything `python -m flows.pipeline` is given, before Prefect starts or any stage runs
    (`--dry-run` too): the study names, or the selection against the DAG; params (a `LAB_PRESET`
    that does not exist) and the files they name."""
    from tasks import stages as st

    if args.base_seed is not None and not args.study:
        raise ParamsError("--base-seed names the second base of a study: use it with --study")
    if args.study:
        if args.stages or args.quick:
            raise ParamsError("--study runs the preset's own arms (presets.<preset>.methods; "
                              "--methods picks some of them); --stages and --quick do not apply")
        for name in study_names(args.study, args.base_seed):
            named = args.study != ["all"]  # `all`: each study runs the named arms it has
            check_study(name, args.methods if named else None, args.seeds if named else None, root)
        return
    params = load(root / "params.yaml")
    methods, seeds = args.methods, args.seeds
    if args.quick:
        methods, seeds = quick_selection(params, methods, seeds)
    check_pipeline(params, st.stage_graph(root), methods=methods, seeds=seeds, stages=args.stages,
                   executor=args.executor, max_parallel=args.max_parallel,
                   threads_per_stage=args.threads, root=root)


def quick_selection(params: Params, methods: list[str] | None,
                    seeds: list[int] | None) -> tuple[list[str], list[int]]:
    """`--quick`: params `pipeline.quick` where the command line names nothing; every method must
    be an arm of the study (`methods`), whose stages the quick run picks from."""
    quick = params.pipeline.quick
    chosen = methods or quick.methods
    extra = [m for m in chosen if m not in params.methods]
    if extra:
        raise ParamsError(f"pipeline.quick.methods {extra} are not in `methods` (the quick run "
                          "picks from the study's stages)")
    return chosen, seeds if seeds is not None else quick.seeds


def study_names(names: list[str], base_seed: int | None = None) -> list[str]:
    """The studies `--study NAMES [--base-seed N]` runs: `all` is every preset that names arms
    (with a base seed, the default study's claim arms too), each `<name>.seed<N>` on a second base.

    >>> study_names(["hint_copier", "default.seed1"]), study_names(["hint_copier"], 2)
    (['hint_copier', 'default.seed1'], ['hint_copier.seed2'])
    """
    from evals.claims import second_base_study
    from tasks.studies import study_presets

    chosen = list(names)
    if names == ["all"]:
        chosen = (["default"] if base_seed is not None else []) + study_presets(ROOT)
    if base_seed is None:
        return chosen
    return [second_base_study("" if n == "default" else n, base_seed) for n in chosen]
