"""GRPO training with TRL's `GRPOTrainer` (no home-made trainer), shared by every reward method.

The same code trains the tiny model on a CPU and a real checkpoint on GPUs: on CUDA it switches to
bf16 and, with `grpo.use_vllm`, to vLLM rollouts in colocate mode; multi-GPU runs go through
`accelerate launch` (TRL/accelerate handle the distribution).

Checkpoints (weights, optimizer, scheduler and RNG state) land in `<output_dir>/checkpoint-<step>`;
a rerun resumes from the newest one, so a killed stage loses at most `save_steps` steps.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)


def grpo_config(g, *, seed: int, output_dir: Path, report_to: Sequence[str] = (),
                run_name: str | None = None):
    """`GRPOConfig` from `params.grpo`. CPU-safe: no bf16, no gradient checkpointing."""
    import torch
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(output_dir), run_name=run_name, seed=seed, data_seed=seed,
        max_steps=g.max_steps, learning_rate=g.learning_rate, lr_scheduler_type="constant",
        per_device_train_batch_size=g.prompts_per_step * g.num_generations,
        num_generations=g.num_generations, max_completion_length=g.max_completion_length,
        temperature=g.temperature, beta=g.beta, loss_type=g.loss_type,
        scale_rewards=g.scale_rewards, epsilon=g.epsilon, epsilon_high=g.epsilon_high,
        logging_steps=g.logging_steps, save_strategy="steps", save_steps=g.save_steps,
        save_total_limit=2, report_to=list(report_to), disable_tqdm=True,
        use_cpu=not cuda, bf16=cuda, gradient_checkpointing=False, dataloader_num_workers=0,
        use_vllm=g.use_vllm, vllm_mode="colocate", remove_unused_columns=False,
    )


def _global_step(checkpoint: Path) -> int:
    import json

    return int(json.loads((checkpoint / "trainer_state.json").read_text())["global_step"])


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete `checkpoint-<step>` folder (one with trainer_state.json)."""
    done = [p for p in Path(output_dir).glob("checkpoint-*")
            if (p / "trainer_state.json").exists() and p.name.split("-")[-1].isdigit()]
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def train(policy_path: Path, rows: list[dict], plan, g, *, seed: int, output_dir: Path,
          callbacks: Sequence = (), report_to: Sequence[str] = (), run_name: str | None = None,
          model=None, tokenizer=None) -> list[dict]:
    """Run GRPO from `policy_path` on `rows` (each with a `prompt`); returns TRL's log history.

    `plan` is a `rewards.MethodPlan` (a plain list of reward functions is accepted too): its
    reward functions, and its `GRPOTrainer` subclass when the method changes the step itself.
    `model`/`tokenizer` reuse an already loaded policy (the one a method's builder saw).
    The final weights and tokenizer are saved to `<output_dir>/final`. Reward callables that
    declare a `trainer` attribute (e.g. RLME's live evaluator) get the trainer after construction.
    """
    import torch
    from datasets import Dataset
    from trl import GRPOTrainer

    from models.policy import load_policy
    from rewards import MethodPlan

    if not isinstance(plan, MethodPlan):
        plan = MethodPlan(list(plan))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(seed)
    if model is None or tokenizer is None:
        model, tokenizer = load_policy(policy_path, for_training=True)
    args = grpo_config(g, seed=seed, output_dir=output_dir, report_to=report_to, run_name=run_name)
    if plan.reward_weights is not None:
        args.reward_weights = list(plan.reward_weights)
    trainer_cls = plan.trainer_cls or GRPOTrainer
    trainer = trainer_cls(model=model, reward_funcs=list(plan.reward_funcs), args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          callbacks=list(callbacks), **plan.trainer_kwargs)
    for f in [*plan.reward_funcs, *plan.loggers]:
        if hasattr(f, "trainer"):
            f.trainer = trainer
    resume = last_checkpoint(output_dir)
    done = resume is not None and _global_step(resume) >= g.max_steps
    if resume is not None:  # callbacks that keep state across a resume (held-out history)
        for cb in callbacks:
            if hasattr(cb, "restore"):
                cb.restore(resume)
    if done:  # a finished run: resuming would take one step past max_steps (transformers 5)
        log.info("already trained to step %d in %s", g.max_steps, resume)
        trainer._load_from_checkpoint(str(resume))
        trainer.state = trainer.state.load_from_json(str(resume / "trainer_state.json"))
    else:
        if resume:
            log.info("resuming from %s", resume)
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    final = Path(output_dir) / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(final)
    return trainer.state.log_history
