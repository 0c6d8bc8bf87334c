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
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)


def grpo_config(g, *, seed: int, output_dir: Path, report_to: Sequence[str] = (),
                run_name: str | None = None, chat_template_kwargs: dict | None = None):
    """`GRPOConfig` from `params.grpo`. CPU-safe: no bf16, no gradient checkpointing.

    `prompts_per_step` is per optimiser step over all ranks: with N processes each rank generates
    and scores prompts_per_step / N prompts' groups, so a run on N ranks is the same experiment
    (same global batch, same learning rate) as on one."""
    import torch
    from trl import GRPOConfig

    from core import ranks

    cuda = torch.cuda.is_available()
    # The optimiser step's prompts are split into gradient_accumulation_steps micro-batches
    # (TRL generates them all at once: steps_per_generation), each split over the ranks.
    accumulation = g.gradient_accumulation_steps
    if g.prompts_per_step % accumulation:
        from core.params import ParamsError

        raise ParamsError(f"grpo.prompts_per_step={g.prompts_per_step} does not split into "
                          f"gradient_accumulation_steps={accumulation} micro-batches")
    return GRPOConfig(
        output_dir=str(output_dir), run_name=run_name, seed=seed, data_seed=seed,
        max_steps=g.max_steps, learning_rate=g.learning_rate,
        lr_scheduler_type="constant_with_warmup" if g.warmup_steps else "constant",
        warmup_steps=g.warmup_steps, weight_decay=g.weight_decay,
        per_device_train_batch_size=per_device_prompts(g.prompts_per_step // accumulation,
                                                       ranks.world_size()) * g.num_generations,
        gradient_accumulation_steps=accumulation,
        num_generations=g.num_generations, max_completion_length=g.max_completion_length,
        temperature=g.temperature, top_p=g.top_p, beta=g.beta, loss_type=g.loss_type,
        scale_rewards=g.scale_rewards, epsilon=g.epsilon, epsilon_high=g.epsilon_high,
        logging_steps=g.logging_steps, save_strategy="steps", save_steps=g.save_steps,
        save_total_limit=2, report_to=list(report_to), disable_tqdm=True,
        use_cpu=not cuda, bf16=cuda, activation_checkpointing=cuda and g.gradient_checkpointing,
        dataloader_num_workers=0, use_vllm=g.use_vllm, vllm_mode=g.vllm_mode,
        vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization, remove_unused_columns=False,
        chat_template_kwargs=chat_template_kwargs or None,
    )


def per_device_prompts(prompts_per_step: int, world_size: int) -> int:
    """Prompts (whole groups) each rank takes per step; the global batch must split evenly.

    >>> per_device_prompts(4, 2)
    2
    """
    from core.params import ParamsError

    if prompts_per_step % world_size:
        raise ParamsError(f"grpo.prompts_per_step={prompts_per_step} does not split over {world_size} "
                         f"processes: use a multiple of {world_size} (each rank takes whole groups)")
    return prompts_per_step // world_size


def _record_first_prompt(trainer, path: Path) -> None:
    """Write the first generation prompt the policy is given (TRL's token ids, decoded with the
    special tokens: the chat template's turns show) to `path`, and log it, on the main process.
    Wraps the trainer's `_tokenize_prompts` (TRL's one tokenisation point for generation)."""
    tokenize = getattr(trainer, "_tokenize_prompts", None)
    if tokenize is None:  # another TRL version: nothing to record
        return

    def recording(prompts):
        out = tokenize(prompts)
        trainer.__dict__.pop("_tokenize_prompts", None)  # once: TRL's own method again
        if trainer.accelerator.is_main_process and out[0]:
            text = trainer.processing_class.decode(list(out[0][0]), skip_special_tokens=False)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            log.info("first prompt given to the policy (%s):\n%s", path.name, text)
        return out

    trainer._tokenize_prompts = recording


def _lab_rollouts(trainer) -> None:
    """GRPO's rollouts through the lab's sampler (models/sampler.py) where it runs the policy:
    TRL's regular generation path (no vLLM, no continuous batching) on a model
    `sampler.supports`. Replaces the trainer's `_generate_single_turn` (TRL's one generation call
    per batch) on this trainer, so GRPOTrainer still drives the loop; `lab_rollouts` is looked up
    at each call (a profiler may wrap it)."""
    if trainer.use_vllm or getattr(trainer, "use_transformers_continuous_batching", False):
        return
    original = trainer._generate_single_turn
    trainer._generate_single_turn = lambda *args, **kwargs: lab_rollouts(trainer, original, *args,
                                                                         **kwargs)


def lab_rollouts(trainer, original, prompt_ids, images, multimodal_fields, num_generations,
                 has_tool_images=False):
    """`_generate_single_turn` through the lab sampler: the same left-padded prompt ids in, the
    trainer's generation config, completions cut after their first EOS (kept), as TRL cuts them,
    no log-probabilities (as TRL's transformers path). Anything else goes to TRL's `original`."""
    import torch
    from trl.extras.profiling import profiling_context
    from trl.trainer.utils import pad

    from models.sampler import lab_generate, supports

    model = trainer.accelerator.unwrap_model(trainer.model)
    if images or multimodal_fields or has_tool_images or not supports(model):
        return original(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
    rows = [torch.tensor(ids) for ids in prompt_ids]
    ids = pad(rows, padding_value=trainer._tokenizer.pad_token_id, padding_side="left",
              pad_to_multiple_of=trainer.pad_to_multiple_of)
    mask = pad([torch.ones_like(r) for r in rows], padding_value=0, padding_side="left",
               pad_to_multiple_of=trainer.pad_to_multiple_of)
    with profiling_context(trainer, "lab_sampler.generate"), torch.no_grad():
        out = lab_generate(model, ids, mask, generation_config=trainer.generation_config)
    eos = set(trainer.eos_token_ids)
    completions = []
    for row in out[:, ids.shape[1]:].tolist():
        end = next((i for i, t in enumerate(row) if t in eos), len(row) - 1)
        completions.append(row[:end + 1])
    return completions, None


def _global_step(checkpoint: Path) -> int:
    import json

    return int(json.loads((checkpoint / "trainer_state.json").read_text())["global_step"])


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete `checkpoint-<step>` folder: one holding the completion marker that
    `models.callbacks.CheckpointMarker` writes last and atomically. A folder without it (a kill
    mid-save; trainer_state.json is written in place, so it may be there but cut short) is
    skipped."""
    from models.callbacks import CHECKPOINT_MARKER

    found = [p for p in Path(output_dir).glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    done = [p for p in found if (p / CHECKPOINT_MARKER).exists()]
    for p in sorted(set(found) - set(done)):
        log.warning("%s has no %s (the save did not finish): not resumed from", p, CHECKPOINT_MARKER)
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def train(policy_path: Path, rows: list[dict], plan, g, *, seed: int, output_dir: Path,
          callbacks: Sequence = (), report_to: Sequence[str] = (), run_name: str | None = None,
          model=None, tokenizer=None, chat=None) -> list[dict]:
    """Run GRPO from `policy_path` on `rows` (each with a `prompt`); returns TRL's log history.

    `plan` is a `rewards.MethodPlan` (a plain list of reward functions is accepted too): its
    reward functions, and its `GRPOTrainer` subclass when the method changes the step itself.
    `model`/`tokenizer` reuse an already loaded policy (the one a method's builder saw).
    The final weights and tokenizer are saved to `<output_dir>/final`. Reward callables that
    declare a `trainer` attribute (e.g. RLME's live evaluator) get the trainer after construction.

    `chat` (a `rewards.chat.ChatFormat`; None = `use_template: auto`) decides whether the prompts
    go through the tokenizer's chat template: if so, each plain prompt becomes TRL's message list
    and TRL renders it with `chat.template_kwargs`. The first prompt the policy was given, decoded
    with its special tokens, is written to `<output_dir>/first_prompt.txt` and logged.
    """
    import torch
    from datasets import Dataset
    from trl import GRPOTrainer

    from models.callbacks import CheckpointMarker
    from models.policy import load_policy
    from rewards import MethodPlan
    from rewards.chat import ChatFormat

    if not isinstance(plan, MethodPlan):
        plan = MethodPlan(list(plan))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(seed)
    if model is None or tokenizer is None:
        model, tokenizer = load_policy(policy_path, for_training=True)
    chat = chat or ChatFormat()
    templated = chat.applies(tokenizer)
    if templated:
        rows = [{**r, "prompt": chat.prompt(tokenizer, r["prompt"])} for r in rows]
    args = grpo_config(g, seed=seed, output_dir=output_dir, report_to=report_to, run_name=run_name,
                       chat_template_kwargs=chat.template_kwargs if templated else None)
    trainer_cls = plan.trainer_cls or GRPOTrainer
    trainer = trainer_cls(model=model, reward_funcs=list(plan.reward_funcs), args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          callbacks=[*callbacks, CheckpointMarker()], **plan.trainer_kwargs)
    for f in [*plan.reward_funcs, *plan.loggers, *callbacks]:
        if hasattr(f, "trainer"):
            f.trainer = trainer
    _record_first_prompt(trainer, Path(output_dir) / "first_prompt.txt")
    _lab_rollouts(trainer)
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
    trainer.save_model(str(final))  # every rank calls it (DeepSpeed gathers); the main one writes
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(final)
    return trainer.state.log_history
