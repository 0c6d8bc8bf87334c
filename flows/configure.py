"""Stage `configure`: each run's resolved settings and code digest, one small file per stage.

Why a stage: DVC decides what to re-run from the params keys and files a stage lists, and a
matrix stage (`train@rlme-0`) cannot list "the `reward.<family>` block of this item, with its
variant's overrides". So this cheap stage reads params.yaml once and writes, for every method or
variant in `methods`, exactly what its stages depend on:

- `data/runs/<method>/train.json`: the reward settings (variant overrides merged), the GRPO
  settings the method trains with, `collapse`, the held-out sampling keys, and the digest of the
  code training that method imports (`core.codedeps`: `flows/train.py`'s import closure plus the
  method's own builder and reward modules); a method whose registry entry `reads_components`
  (RLVRR) adds the digest of the reference components;
- `data/runs/<method>/evaluate.json`: the `eval` settings, the task and completion budget, the
  self-evaluation probe, and the digest of the evaluation code (with the method's extra
  evaluation, if its registry entry has one, and the settings it reads);
- `data/runs/base/evaluate.json`: the same for the base model (every method's task is scored);
- `data/runs/base/build.json`: what `build_base` reads, the seed and `base_model` resolved with the
  preset (not `judge`, an on-demand stage's, nor `chat`, which only shapes prompts), so adding or
  editing another preset does not rebuild the base.

`train@M-S` and `evaluate@M-S` depend on their file instead of whole params sections and code
folders. This stage re-runs on any code or params edit, but it rewrites a file with the same
bytes unless that run's inputs changed, and DVC re-runs only the stages whose file changed:
editing `reward.rlme` or `rewards/meta_eval.py` re-runs the RLME family and the report, nothing
else. The seed is not in these files: it is in the stage's command.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.codedeps import code_digest, files_digest
from core.io import write_json
from core.methods import method as registered
from core.params import Params, ResolvedMethod, load

RUNS = paths.DATA / "runs"
# Held-out sampling during training reads these `eval` keys (flows/train.py); the rest of `eval`
# only matters to the evaluate stage.
HELDOUT_KEYS = ("heldout_k", "heldout_n", "temperature", "max_new_tokens", "batch_size")


def train_config(params: Params, method: str | ResolvedMethod) -> dict:
    """What `train@<method>-<seed>` depends on besides its seed, the data and the base weights
    (`method`: a name, or resolved once by the caller)."""
    run = params.resolve(method) if isinstance(method, str) else method
    entry = registered(run.family)
    config = {"method": run.name, "family": run.family, "reward": run.cfg.model_dump(),
              "grpo": run.grpo.model_dump(), "collapse": params.collapse.model_dump(),
              "heldout": {k: getattr(params.eval, k) for k in HELDOUT_KEYS},
              "base_model_path": params.base_model.path,
              "code": code_digest(train_code(run)),
              **chat_config(params, run.name)}
    if entry.reads_components:
        config["components"] = files_digest(sorted(paths.COMPONENTS.glob("*.jsonl")))
    return config


def chat_config(params: Params, method: str | None = None) -> dict:
    """`base_model.chat` for a local checkpoint (its prompts may go through a chat template), with
    the method's own thinking (`grpo.enable_thinking`); the tiny model's tokenizer has no
    template, so the setting cannot change its runs: nothing."""
    if not params.base_model.path:
        return {}
    chat = params.base_model.chat.model_dump()
    thinking = params.method_grpo(method).enable_thinking if method else None
    return {"chat": chat if thinking is None else {**chat, "enable_thinking": thinking}}


def evaluate_budgets(params: Params, methods: list[str]) -> dict[str, int]:
    """Completion budget of each trained task not among `eval.benchmarks` (a policy is always
    scored on the task it trained on, with the budget it trained with: GenRM answers are long)."""
    budgets: dict[str, int] = {}
    for method in methods:
        g = params.method_grpo(method)
        if g.task not in params.eval.benchmarks:
            budgets[g.task] = max(budgets.get(g.task, 0), params.eval.max_new_tokens,
                                  g.max_completion_length)
    return budgets


def self_eval_probe(params: Params, method: str | None):
    """The settings the self-evaluation probe prompts with: the run's own template and questions
    (what its reward read) when its registry entry says `self_eval_probe` (RLME), else
    `eval.self_eval` (the base and every other method)."""
    if method is not None:
        family, cfg = params.method_config(method)
        if registered(family).self_eval_probe:
            return cfg
    return params.eval.self_eval


def evaluate_config(params: Params, method: str | None) -> dict:
    """What `evaluate@<method>-<seed>` (or `evaluate_base` for None) depends on besides its policy."""
    probe = self_eval_probe(params, method)
    config: dict = {"method": method or "base", "eval": params.eval.model_dump(exclude={"self_eval"}),
                    "budgets": evaluate_budgets(params, list(params.methods) if method is None
                                                else [method]),
                    "self_eval": {k: getattr(probe, k) if k != "questions"
                                  else [q.model_dump() for q in probe.questions]
                                  for k in ("template", "questions", "end_marker")},
                    **chat_config(params, method)}
    if method is None:
        config["seed"] = params.seed  # the base's samples are drawn with the top-level seed
    else:
        family, cfg = params.method_config(method)
        config["family"] = family
        if registered(family).evaluate:  # the method's extra evaluation: the settings it reads
            config["reward"] = cfg.model_dump()
    config["code"] = code_digest(evaluate_code(params, method))
    return config


def train_code(run: ResolvedMethod) -> list[str]:
    """The modules whose import closure a training of `run` runs (its run file's `code` digest)."""
    return ["flows.train", *registered(run.family).train_modules()]


def evaluate_code(params: Params, method: str | None) -> list[str]:
    """The modules whose import closure `evaluate@<method>` (None: `evaluate_base`) runs: the
    evaluate stage and the method's own extra evaluation, if its registry entry has one."""
    if method is None:
        return ["flows.evaluate"]
    entry = registered(params.method_config(method)[0])
    return ["flows.evaluate", *(entry.evaluate_modules() if entry.evaluate else [])]


def build_config(params: Params) -> dict:
    """What `build_base` depends on besides its code files and the prepared data (both DVC deps)."""
    base = params.base_model
    return {"seed": params.seed, "path": base.path, "vocab_size": base.vocab_size,
            "arch": base.arch.model_dump(), "sft": base.sft.model_dump()}


def configure(params: Params, out: Path = RUNS) -> dict[str, str]:
    """Write every run's files under `out`; returns {file: its code digest (build.json: none)}
    for the log."""
    written: dict[str, str] = {}
    files = {Path("base") / "build.json": build_config(params),
             Path("base") / "evaluate.json": evaluate_config(params, None)}
    for method in params.methods:
        files[Path(method) / "train.json"] = train_config(params, method)
        files[Path(method) / "evaluate.json"] = evaluate_config(params, method)
    keep = {out / f for f in files}
    if out.exists():  # a method removed from `methods` leaves no stale file behind
        for stale in sorted(out.rglob("*.json")):
            if stale not in keep:
                stale.unlink()
    for rel, config in files.items():
        write_json(out / rel, config)
        written[str(rel)] = config.get("code", "")
    return written


@flow(name="configure", log_prints=True)
def configure_flow(preset: str | None = None) -> dict[str, str]:
    """Resolve every run's settings and code digest into data/runs/."""
    return configure(load(preset=preset))


def main() -> None:
    p = parser(__doc__)
    args = p.parse_args()
    written = configure(load(args.params, preset=args.preset))
    print(json.dumps(written, indent=1))


if __name__ == "__main__":
    run_main(main)
