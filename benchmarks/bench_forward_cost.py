"""Extra forward passes of the model-scored rewards against the policy's own log-prob pass.

DRO and RLME score a generation batch with the model: DRO's P (every reference token's probability
after every rollout's CoT) and RLME's evaluator log P(target) per meta-question must each come from
ONE batched forward pass (docs/methods/dro.md, docs/methods/rlme.md). Their price is then about
one more forward pass over the batch, the same order as the per-token log-prob pass TRL makes over
prompt + completion for the loss. This script measures them on the same batch, in one run, with
interleaved repeats and medians:

- ``DRO P pass``: :func:`models.dro_trainer.score_rollouts` as :class:`DroGRPOTrainer` runs it
  (tokenising prompt, CoT and reference, one no-grad forward, projecting only the reference
  positions onto the vocabulary);
- ``DRO reward``: the whole :meth:`DroGRPOTrainer._calculate_rewards` (P pass, rubrics, gates);
- ``RLME evaluator pass``: :func:`rewards.meta_eval.target_logprobs` for one meta-question over
  the batch (the evaluator prompt wraps problem and solution in the question template, so it is
  longer than prompt + completion);
- ``RLME reward``: the whole live ``rlme`` reward callable (rendering, every question);
- ``policy log-probs``: TRL's ``_get_per_token_logps_and_entropies`` over prompt + completion, no
  grad and no entropy (the cheapest form of the pass the loss makes; its training form also
  back-propagates).

The batch: ``--rollouts`` completions (``num_generations`` per prompt, arith train prompts) of
exactly ``--new-tokens`` sampled tokens, from ``data/base_model`` if it exists, else from a randomly
initialised Llama of ``base_model.arch`` with a tokenizer trained on the world's text (a random
model writes no answer marker, so its whole completion is the CoT: the dearest case for the P pass).

    python -m benchmarks.bench_forward_cost [--repeats 15] [--rollouts 32] [--new-tokens 64]

Prints a table and writes ``benchmarks/results/forward_cost.json`` (git-tracked, a DVC metric).
Target (set by the lab): DRO's P pass <= 1.3x the policy pass.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 1.3


def policy_and_tokenizer(params, work: Path):
    """(model, tokenizer, source): the built base model, or a random one of the configured arch."""
    from core import paths
    from models.policy import load_policy
    from models.tiny import build_model, build_tokenizer, corpus
    from world import generate_world

    base = paths.base_model_dir(params)
    if (base / "config.json").exists():
        model, tokenizer = load_policy(base, for_training=True)
        return model, tokenizer, str(base)
    prepared = paths.PREPARED
    if not (prepared / "arith_train.jsonl").exists():
        prepared = work / "prepared"
        generate_world(params.world, prepared)
    tokenizer = build_tokenizer(corpus(prepared), params.base_model.vocab_size)
    model = build_model(params.base_model.arch, tokenizer, params.seed)
    return model, tokenizer, "random init (base_model.arch)"


def arith_rows(params, work: Path, n: int) -> list[dict]:
    from core import paths
    from core.io import read_jsonl

    path = paths.PREPARED / "arith_train.jsonl"
    if not path.exists():
        path = work / "prepared" / "arith_train.jsonl"
    return [{"prompt_id": r["id"], "prompt": r["prompt"], "answer": r["answer"], "reference": r["reference"]}
            for r in read_jsonl(path)[:n]]


def make_trainer(params, model, tokenizer, rows: list[dict], work: Path):
    """The DRO trainer exactly as training builds it (TRL patches the model's forward here)."""
    from datasets import Dataset

    from models.dro_trainer import build
    from models.grpo import grpo_config
    from rewards import MethodContext

    family, cfg = params.method_config("dro")
    g = params.method_grpo("dro")
    plan = build(MethodContext(name="dro", family=family, cfg=cfg, grpo=g, seed=params.seed))
    args = grpo_config(g, seed=params.seed, output_dir=work / "trainer")
    return plan.trainer_cls(model=model, reward_funcs=plan.reward_funcs, args=args,
                            train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                            **plan.trainer_kwargs)


def rlme_reward(params, model, tokenizer):
    """The live `rlme` reward callable exactly as training builds it (the policy evaluates)."""
    from rewards import MethodContext
    from rewards.meta_eval import build

    family, cfg = params.method_config("rlme")
    ctx = MethodContext(name="rlme", family=family, cfg=cfg, grpo=params.method_grpo("rlme"),
                        seed=params.seed, policy=model, tokenizer=tokenizer)
    return build(ctx).reward_funcs[0]


def sample(model, tokenizer, prompts: list[str], new_tokens: int, seed: int) -> list[list[int]]:
    """Completion token ids of exactly `new_tokens` tokens each (EOS suppressed until then)."""
    import torch

    torch.manual_seed(seed)
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        ids = model.generate(**enc, do_sample=True, temperature=1.0, top_p=None, top_k=None,
                             min_new_tokens=new_tokens, max_new_tokens=new_tokens,
                             pad_token_id=tokenizer.pad_token_id)
    return ids[:, enc["input_ids"].shape[1]:].tolist()


def policy_inputs(tokenizer, prompts: list[str], completion_ids: list[list[int]]):
    """TRL's layout: left-padded prompt ids, right-padded completion ids, and their mask."""
    import torch
    from trl.trainer.utils import pad

    prompt_ids = [torch.tensor(ids) for ids in tokenizer(text=prompts)["input_ids"]]
    completions = [torch.tensor(ids) for ids in completion_ids]
    ids = torch.cat([pad(prompt_ids, tokenizer.pad_token_id, padding_side="left"),
                     pad(completions, tokenizer.pad_token_id, padding_side="right")], dim=1)
    mask = torch.cat([pad([torch.ones_like(p) for p in prompt_ids], 0, padding_side="left"),
                      pad([torch.ones_like(c) for c in completions], 0, padding_side="right")], dim=1)
    return ids, mask, max(len(c) for c in completion_ids)


def measure(repeats: int, rollouts: int, new_tokens: int, preset: str | None) -> dict:
    import torch

    from core.params import load
    from models.dro_trainer import reference_answer, score_rollouts
    from rewards.meta_eval import target_logprobs

    params = load(preset=preset)
    G = params.method_grpo("dro").num_generations
    work = Path(tempfile.mkdtemp(prefix="forward_cost_"))
    model, tokenizer, source = policy_and_tokenizer(params, work)
    rows = [r for r in arith_rows(params, work, rollouts // G) for _ in range(G)]
    trainer = make_trainer(params, model, tokenizer, rows, work)
    model = trainer.model.eval()
    prompts = [r["prompt"] for r in rows]
    completion_ids = sample(model, tokenizer, prompts, new_tokens, params.seed)
    completions = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    ids, mask, keep = policy_inputs(tokenizer, prompts, completion_ids)
    marker = trainer.dro.answer_marker

    def p_pass():
        with trainer.accelerator.autocast():
            score_rollouts(model, tokenizer, prompts, rows, completion_ids, "arith", marker)

    def dro_reward():
        trainer._calculate_rewards(rows, prompts, completions, completion_ids)

    def policy_pass():
        with torch.no_grad():
            trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, batch_size=len(rows))

    rlme = rlme_reward(params, model, tokenizer)
    rlme_prompts = rlme.render(prompts, completions)[0]
    question = rlme.questions[0]
    rlme_target = question.target + (rlme.end_marker if rlme.end_marker is not None
                                     else tokenizer.eos_token or "")

    def rlme_pass():
        target_logprobs(model, tokenizer, rlme_prompts, rlme_target)

    def rlme_full():
        rlme(prompts=prompts, completions=completions, prompt_id=[r["prompt_id"] for r in rows],
             answer=[r["answer"] for r in rows])

    passes = {"DRO P pass": p_pass, "DRO reward": dro_reward, "RLME evaluator pass": rlme_pass,
              "RLME reward": rlme_full, "policy log-probs": policy_pass}
    times: dict[str, list[float]] = {name: [] for name in passes}
    for r in range(repeats + 2):  # two warm-up rounds, then interleaved timed rounds
        for name, fn in passes.items():
            start = time.perf_counter()
            fn()
            if r >= 2:
                times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    n_ref = [len(tokenizer(reference_answer(r, "arith", marker), add_special_tokens=False)["input_ids"])
             for r in rows]
    return {
        "model": source, "parameters": sum(p.numel() for p in model.parameters()),
        "torch_threads": torch.get_num_threads(), "rollouts": len(rows), "num_generations": G,
        "completion_tokens": new_tokens,
        "prompt_tokens_mean": statistics.mean(mask.sum(1).tolist()) - new_tokens,
        "reference_tokens_mean": statistics.mean(n_ref), "repeats": repeats,
        "median_s": median, "ratio_p_vs_policy": median["DRO P pass"] / median["policy log-probs"],
        "ratio_reward_vs_policy": median["DRO reward"] / median["policy log-probs"],
        "ratio_rlme_pass_vs_policy": median["RLME evaluator pass"] / median["policy log-probs"],
        "rlme_questions": len(rlme.questions),
        "rlme_prompt_tokens_mean": statistics.mean(
            len(tokenizer(t)["input_ids"]) for t in rlme_prompts),
        "target_ratio": TARGET_RATIO,
    }


def table(res: dict) -> str:
    base = res["median_s"]["policy log-probs"]
    lines = ["| pass | median (ms) | x policy log-probs |", "|---|---|---|"]
    for name, t in res["median_s"].items():
        lines.append(f"| {name} | {1000 * t:.2f} | {t / base:.2f} |")
    return "\n".join(lines)


def main() -> None:
    from core.io import write_json
    from core.params import ROOT

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=15, help="timed rounds (after two warm-up rounds)")
    p.add_argument("--rollouts", type=int, default=32, help="completions in the generation batch")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens per completion")
    p.add_argument("--preset", default=None)
    args = p.parse_args()
    res = measure(args.repeats, args.rollouts, args.new_tokens, args.preset)
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    write_json(ROOT / "benchmarks" / "results" / "forward_cost.json", res)
    verdict = "within" if res["ratio_p_vs_policy"] <= TARGET_RATIO else "OVER"
    print(f"Model-scored rewards vs the policy's log-prob pass ({res['model']}, "
          f"{res['parameters'] / 1e6:.2f}M parameters, "
          f"{res['rollouts']} rollouts x {res['completion_tokens']} tokens, prompt ~"
          f"{res['prompt_tokens_mean']:.0f}, reference ~{res['reference_tokens_mean']:.0f} tokens; "
          f"median of {res['repeats']} interleaved rounds, {res['torch_threads']} threads)")
    print(table(res))
    print(f"DRO P pass / policy log-probs = {res['ratio_p_vs_policy']:.2f}x "
          f"({verdict} the {TARGET_RATIO}x target); RLME evaluator pass (one of "
          f"{res['rlme_questions']} questions, prompts ~{res['rlme_prompt_tokens_mean']:.0f} tokens) "
          f"= {res['ratio_rlme_pass_vs_policy']:.2f}x")


if __name__ == "__main__":
    main()
