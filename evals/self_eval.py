"""How well a policy judges its own solutions: the evaluator signal RLME's live reward rests on.

For each prompt, `k` solutions are sampled from the policy; the policy, used as the evaluator with
RLME's template and each meta-question (params `reward.rlme`), gives P(target) for every solution;
the AUROC of P(target) against true correctness says whether live self-evaluation carries signal
(the lab aimed for > 0.75 for the tiny base model; it reaches 0.85). Reported as
`self_eval/auroc_q<k>` next to the correct rate of the samples (AUROC needs both classes; with one
class it is NaN and not logged).
"""

from __future__ import annotations

import numpy as np
import torch

from models.generation import generate
from rewards.evaluator_prompt import render_evaluator_prompt, target_logprobs
from rewards.verifiable import extract_boxed, rlvr_score


def self_eval_auroc(model, tokenizer, rows: list[dict], rlme_cfg, *, k: int = 2,
                    temperature: float = 1.0, max_new_tokens: int = 64, batch_size: int = 64,
                    seed: int = 0, judge=None, prefix: str = "self_eval",
                    chat=None) -> dict[str, float]:
    """AUROC of the policy's P(target | evaluator prompt) against correctness, per meta-question.

    `judge` = (model, tokenizer) scores the policy's solutions instead of the policy itself (an
    external evaluator, e.g. `flows.build_judge`); metrics are named `<prefix>/...`. `chat` (a
    `rewards.chat.ChatFormat`; None = auto) samples through the policy's chat template and asks an
    evaluator with a template in a user turn, as RLME's reward does.
    """
    from sklearn.metrics import roc_auc_score

    from rewards.chat import ChatFormat

    chat = chat or ChatFormat()
    samples = generate(model, tokenizer, [chat.render(tokenizer, r["prompt"]) for r in rows],
                       num_samples=k, temperature=temperature, max_new_tokens=max_new_tokens,
                       batch_size=batch_size, seed=seed)
    pairs = [(r, s) for r, ss in zip(rows, samples) for s in ss]
    correct = np.array([rlvr_score(s, r["answer"]) for r, s in pairs])
    out = {f"{prefix}/correct_rate": float(correct.mean()), f"{prefix}/n": float(len(pairs))}
    model, tokenizer = judge or (model, tokenizer)
    end = rlme_cfg.end_marker if rlme_cfg.end_marker is not None else (tokenizer.eos_token or "")
    model.eval()
    for q_index, q in enumerate(rlme_cfg.questions):
        prompts = [render_evaluator_prompt(rlme_cfg.template, problem=r["prompt"], solution=s,
                                           answer=extract_boxed(s) or "", question=q.text,
                                           length=len(s))
                   for r, s in pairs]
        with torch.no_grad():
            lp = torch.cat([target_logprobs(model, tokenizer, prompts[i:i + batch_size], q.target + end,
                                            chat=chat)
                            for i in range(0, len(prompts), batch_size)]).numpy()
        out[f"{prefix}/p_target_q{q_index}"] = float(np.exp(lp).mean())
        if 0 < correct.sum() < len(correct):
            out[f"{prefix}/auroc_q{q_index}"] = float(roc_auc_score(correct, lp))
    return out
