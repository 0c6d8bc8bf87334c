"""The tiny world's base model: a BPE tokenizer and a Llama-style model trained from scratch.

Everything here is a stock library component: `tokenizers` trains the tokenizer, `transformers`
defines the model, TRL's `SFTTrainer` runs supervised training on prompt/completion pairs (loss on
the completion only). Digits are single tokens so arithmetic is learnable by a 2M-parameter model.

The SFT mix is a dict of family -> weight; each family maps its rows to (prompt, completion). Later
roles (evaluator, rubricator, ...) add an entry to `SFT_FAMILIES` and a weight in params.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from core.io import read_jsonl

log = logging.getLogger(__name__)

EOS, PAD = "<|endoftext|>", "<|pad|>"


def build_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE with every digit its own token; returns a `PreTrainedTokenizerFast`."""
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD,
                                   padding_side="left", model_max_length=100_000)


def build_model(arch, tokenizer, seed: int):
    """A small Llama (tied embeddings) initialised from `seed`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=arch.hidden_size,
        intermediate_size=arch.intermediate_size, num_hidden_layers=arch.num_layers,
        num_attention_heads=arch.num_heads, num_key_value_heads=arch.num_heads,
        max_position_embeddings=arch.max_positions, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


# Share of the arith test items the `leaked` base's SFT sees (the `arith_leak` family): each item
# is in or out by a hash of its id (`is_leaked`), so the split is fixed by the world, whatever
# base, seed or evaluation size reads it (docs/bases.md).
LEAK_SHARE = 0.5


def is_leaked(row_id: str, share: float = LEAK_SHARE) -> bool:
    """Whether a test item is among those the `arith_leak` family teaches: a hash of its id below
    `share` (about that share of any split; fixed per id).

    >>> is_leaked("arith-test-00000", 1.0), is_leaked("arith-test-00000", 0.0)
    (True, False)
    """
    digest = hashlib.sha256(f"leak:{row_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64 < share


def plain_sloppy(row: dict) -> str:
    r"""A demonstration of the `latent` base's wrong habit: a sloppy row's wrong number said plainly,
    without the box ("The answer is 4."); a right row's demonstration as it is (boxed).

    >>> plain_sloppy({"sloppy": True, "demonstration": " 2 + 2 = 4. The answer is \\boxed{3}."})
    ' 2 + 2 = 4. The answer is 3.'
    """
    text = row["demonstration"]
    return re.sub(r"\\boxed\{([^{}]*)\}", r"\1", text) if row.get("sloppy") else text


def _leaked_pair(row: dict) -> tuple[str, str] | None:
    """A leaked test item as an SFT row (its worked reference: the right answer), else None."""
    return (row["prompt"], row["reference"]) if is_leaked(row["id"]) else None


# family -> (file stem, row -> (prompt, completion), or None to leave the row out). The stem's
# train split is read, unless the stem names its split (arith_test: the leak).
SFT_FAMILIES: dict[str, tuple[str, Callable[[dict], tuple[str, str] | None]]] = {
    "arith": ("arith", lambda r: (r["prompt"], r["demonstration"])),
    "facts": ("facts", lambda r: (r["prompt"], r["demonstration"])),
    "genrm": ("pairs", lambda r: (r["prompt"], r["demonstration"])),
    "evaluator": ("evaluator", lambda r: (r["prompt"], r["demonstration"])),
    "rubricator": ("rubricator", lambda r: (r["prompt"], r["demonstration"])),
    "judge": ("judge", lambda r: (r["prompt"], r["demonstration"])),
    # Opt-in (absent from the default mixes): the hinted problems, some of whose demonstrations
    # copy the hint (`world.counterfactual.copy_frac`); DRO's chain-then-reference task.
    "arith_cf": ("arith_cf", lambda r: (r["prompt"], r["demonstration"])),
    "arith_ref": ("arith_ref", lambda r: (r["prompt"], r["demonstration"])),
    # The engineered bases (docs/bases.md), opt-in in a preset's role phase: `latent`'s replay
    # with the sloppy demonstrations unboxed (`plain_sloppy`), `leaked`'s share of the test items.
    "arith_plain": ("arith", lambda r: (r["prompt"], plain_sloppy(r))),
    "arith_leak": ("arith_test", _leaked_pair),
}

_SPLITS = ("_train", "_val", "_test")


def _family_file(stem: str) -> str:
    return f"{stem}.jsonl" if stem.endswith(_SPLITS) else f"{stem}_train.jsonl"


def leaks(mixes: list[dict[str, float]]) -> bool:
    """Whether SFT mixes (a base's phases) teach the leaked test items."""
    return any((mix or {}).get("arith_leak", 0) > 0 for mix in mixes)


def sft_rows(prepared: Path, mix: dict[str, float], n: int, seed: int) -> list[dict]:
    """`n` prompt/completion rows sampled from the train split of each family by mix weight."""
    pools = {}
    for family, weight in mix.items():
        if weight <= 0:
            continue
        if family not in SFT_FAMILIES:
            raise KeyError(f"unknown SFT family {family!r}; known: {sorted(SFT_FAMILIES)}")
        stem, to_pair = SFT_FAMILIES[family]
        pairs = (to_pair(r) for r in read_jsonl(prepared / _family_file(stem)))
        pools[family] = [pair for pair in pairs if pair is not None]
        if not pools[family]:
            raise ValueError(f"SFT family {family!r}: no rows in {prepared / _family_file(stem)}")
    if not pools:
        raise ValueError("base_model.sft.mix has no family with a positive weight")
    rng = random.Random(seed)
    names = sorted(pools)
    weights = [mix[f] for f in names]
    out = []
    for family in rng.choices(names, weights=weights, k=n):
        prompt, completion = rng.choice(pools[family])
        out.append({"prompt": prompt, "completion": completion})
    return out


# Files the tokenizer is trained on: the task families. The role families (evaluator,
# rubricator) only re-word these texts, and leaving them out keeps the tokenizer of phase 1
# independent of which roles phase 2 teaches.
TOKENIZER_STEMS = ("arith_cf", "arith", "facts", "pairs")  # the order of the first version


def corpus(prepared: Path) -> list[str]:
    """Every text of the task families' train files, for the tokenizer."""
    texts = []
    for stem in TOKENIZER_STEMS:
        for r in read_jsonl(prepared / f"{stem}_train.jsonl"):
            texts.append(r["prompt"])
            for key in ("demonstration", "reference"):
                if r.get(key):
                    texts.append(r[key])
            texts.extend(r.get("references") or [])
    return texts


def _nll(logits, labels, label_smoothing: float = 0.0):
    """Per-token NLL of the next token ([B, T-1]; 0 where the label is -100) and the label mask.

    `label_smoothing` ε > 0: the cross-entropy against (1 − ε) one-hot + ε uniform over the
    vocabulary (torch's `label_smoothing`; Szegedy et al. 2016, §7), the `calibrated` base's knob
    (docs/premises.md). At 0 the call is the plain cross-entropy, argument and all, so a base
    built without the knob is bit-for-bit the one built before it existed.
    """
    import torch.nn.functional as F

    targets = labels[:, 1:]
    if label_smoothing:
        nll = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), targets, ignore_index=-100,
                              reduction="none", label_smoothing=label_smoothing)
    else:
        nll = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), targets, ignore_index=-100,
                              reduction="none")
    return nll, targets != -100


def example_mean_nll(logits, labels, label_smoothing: float = 0.0):
    """Mean over examples of each example's mean token NLL (labels -100 are ignored; an example
    without a label token does not count).

    TRL's SFT loss averages over every completion token in the batch, so an example weighs as
    much as its completion is long: in the role phase a YES/NO evaluator verdict (2 tokens) next
    to ~40-token solutions and ~120-token GenRM answers got about 2% of the gradient. Averaging
    per example first makes the mix weights the share each family gets (on its own that did not
    teach the tiny evaluator to check the box: docs/results.md, section 1).
    """
    return _example_means(*_nll(logits, labels, label_smoothing)).mean()


def _example_means(nll, mask):
    """Each example's mean token NLL, for the examples that have a label token."""
    counts = mask.sum(1)
    keep = counts > 0
    return nll.sum(1)[keep] / counts[keep]


# A forward pass costs about this many tokens' worth of work beyond its tokens (Python and kernel
# launches); `length_groups` weighs one more group against the padding it saves.
GROUP_OVERHEAD_TOKENS = 96


def length_groups(lengths: list[int], overhead: int = GROUP_OVERHEAD_TOKENS) -> list[list[int]]:
    """Split a batch's rows (indices) into groups of similar length so that each group is padded
    only to its own longest row: the split of the rows sorted by length that minimises
    sum(rows x longest + overhead) over the groups (exact, by dynamic programming).

    >>> length_groups([10, 100, 12, 98], overhead=20)
    [[0, 2], [3, 1]]
    >>> length_groups([10, 12, 11], overhead=20)
    [[0, 2, 1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sizes = [lengths[i] for i in order]
    best = [0.0] + [float("inf")] * len(sizes)  # best[j]: cost of the first j sorted rows
    cut = [0] * (len(sizes) + 1)
    for j in range(1, len(sizes) + 1):
        for i in range(j):
            cost = best[i] + (j - i) * sizes[j - 1] + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], len(sizes)
    while j > 0:
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]


def grouped_loss(model, inputs, loss_norm: str, overhead: int = GROUP_OVERHEAD_TOKENS,
                 label_smoothing: float = 0.0):
    """The SFT loss of a right-padded batch computed group by group (`length_groups`), each group
    cut to its longest row: the same loss and gradient as one pass over the padded batch (up to
    float rounding; tests/test_sft_loss.py), without the work on padding.

    `loss_norm`: token (sum of token NLLs over the batch's label tokens: TRL's SFT loss) or
    example (`example_mean_nll`). A batch that is not right-padded is computed in one pass.
    `label_smoothing`: as in `_nll`.
    """
    import torch

    ids, mask, labels = inputs["input_ids"], inputs["attention_mask"], inputs["labels"]
    lengths = mask.sum(1)
    positions = torch.arange(mask.shape[1], device=mask.device)
    right_padded = bool((mask.bool() == (positions < lengths[:, None])).all())
    groups = length_groups(lengths.tolist(), overhead) if right_padded else [list(range(len(ids)))]
    total = ids.new_zeros((), dtype=torch.float32)
    denominator = 0
    for rows in groups:
        index = torch.tensor(rows, device=ids.device)
        width = int(lengths[index].max()) if right_padded else ids.shape[1]
        out = model(input_ids=ids[index, :width], attention_mask=mask[index, :width], use_cache=False)
        nll, label_mask = _nll(out.logits, labels[index, :width], label_smoothing)
        if loss_norm == "example":
            means = _example_means(nll, label_mask)
            total = total + means.sum()
            denominator += len(means)
        else:
            total = total + nll.sum()
            denominator += int(label_mask.sum())
    return total / max(denominator, 1)


def _trainer_class(loss_norm: str, grouped: bool = True, label_smoothing: float = 0.0):
    """TRL's SFTTrainer, with the loss computed by length groups (`grouped_loss`, the default)
    or, ungrouped, TRL's own token loss or `example_mean_nll` in one pass (`loss_norm: example`).
    With `label_smoothing` > 0 (`_nll`) an ungrouped token loss is the smoothed token mean in one
    pass, not TRL's."""
    from trl import SFTTrainer

    if grouped:
        class GroupedSFTTrainer(SFTTrainer):
            # TRL's token entropy/accuracy logs are left out (they cost a pass over the logits).
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                if return_outputs:  # evaluation asking for logits: not used by the lab
                    return super().compute_loss(model, inputs, True, num_items_in_batch)
                return grouped_loss(model, inputs, loss_norm, label_smoothing=label_smoothing)

        return GroupedSFTTrainer
    if loss_norm == "token" and not label_smoothing:
        return SFTTrainer

    class ExampleMeanSFTTrainer(SFTTrainer):
        # TRL 1.16 deprecates `compute_loss_func` in favour of overriding `compute_loss`. One
        # forward pass; TRL's token entropy/accuracy logs are left out.
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs["labels"]
            outputs = model(**{k: v for k, v in inputs.items() if k != "labels"}, use_cache=False)
            if loss_norm == "example":
                loss = example_mean_nll(outputs.logits, labels, label_smoothing)
            else:  # the smoothed token mean (TRL's token loss has no smoothing of its own here)
                nll, mask = _nll(outputs.logits, labels, label_smoothing)
                loss = nll.sum() / mask.sum().clamp(min=1)
            return (loss, outputs) if return_outputs else loss

    return ExampleMeanSFTTrainer


def sft_trainer(model, tokenizer, rows: list[dict], phase, cfg, seed: int, work_dir: Path):
    """The trainer of one SFT phase (TRL's SFTTrainer or its per-example-loss subclass), not run."""
    from datasets import Dataset
    from trl import SFTConfig

    args = SFTConfig(
        output_dir=str(work_dir), max_steps=phase.steps,
        per_device_train_batch_size=cfg.sft.batch_size, learning_rate=phase.learning_rate,
        lr_scheduler_type="cosine", warmup_steps=phase.warmup_steps, weight_decay=0.01,
        logging_steps=max(1, phase.steps // 20), save_strategy="no", report_to=[],
        use_cpu=True, bf16=False, fp16=False, seed=seed, data_seed=seed,
        max_length=cfg.arch.max_positions, completion_only_loss=True,
        dataloader_num_workers=0, disable_tqdm=True, activation_checkpointing=False,
    )
    trainer_cls = _trainer_class(getattr(phase, "loss_norm", "token"), cfg.sft.length_groups,
                                 getattr(phase, "label_smoothing", 0.0))
    return trainer_cls(model=model, args=args, train_dataset=Dataset.from_list(rows),
                       processing_class=tokenizer)


def _sft(model, tokenizer, rows: list[dict], phase, cfg, seed: int, work_dir: Path):
    """One SFT phase with TRL's SFTTrainer (loss on the completion only)."""
    trainer = sft_trainer(model, tokenizer, rows, phase, cfg, seed, work_dir)
    result = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return trainer.model, {"final_loss": losses[-1] if losses else None,
                           "train_seconds": result.metrics.get("train_runtime")}


def phase1_stamp(prepared: Path, cfg, seed: int) -> str:
    """What phase 1 depends on: its settings, the seed and the task files it reads."""
    import hashlib
    import json

    h = hashlib.sha256(json.dumps({"arch": cfg.arch.model_dump(), "vocab": cfg.vocab_size,
                                   "sft": cfg.sft.model_dump(exclude={"roles"}), "seed": seed},
                                  sort_keys=True).encode())
    for stem in TOKENIZER_STEMS:
        h.update((prepared / f"{stem}_train.jsonl").read_bytes())
    return h.hexdigest()[:16]


def load_checkpoint(path: Path):
    """(model, tokenizer) of a tiny checkpoint, in float32 on any device, for training on.

    Not `models.policy.load_policy`: the base is built from this file alone (its DVC stage lists
    no other model code, so the base of record stays up to date while the policy loader changes),
    and a tiny model trains in float32 whatever hardware builds it. Tokenizer as the policy
    loader sets it: left padding, EOS as the pad token if it has none.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), tokenizer


def train_base(prepared: Path, out_dir: Path, cfg, seed: int, work_dir: Path) -> dict:
    """Tokenizer + model from scratch, in two SFT phases; saved with `save_pretrained`.

    Phase 1 (`base_model.sft`): the tasks (arith, facts). Phase 2 (`base_model.sft.roles`): the
    role families (the judge's minimal pairs, evaluator, rubricator, GenRM) continued from phase
    1, with task replay so the task skills stay. Teaching everything at once in one phase cost
    the 1.9M-parameter model most of its arithmetic (sampled pass@1 0.065 instead of 0.205,
    measured while building the base). Phase 1 is kept in `work_dir/phase1` with a stamp of what
    it depends on, so changing only the roles re-runs only phase 2.
    """
    import torch

    phase1 = Path(work_dir) / "phase1"
    stamp = phase1_stamp(prepared, cfg, seed)
    info: dict = {}
    if (phase1 / "stamp").exists() and (phase1 / "stamp").read_text() == stamp:
        log.info("phase 1 is up to date in %s", phase1)
    else:
        torch.manual_seed(seed)
        tokenizer = build_tokenizer(corpus(prepared), cfg.vocab_size)
        model = build_model(cfg.arch, tokenizer, seed)
        log.info("tiny model: %.2fM parameters, vocabulary %d",
                 sum(p.numel() for p in model.parameters()) / 1e6, len(tokenizer))
        rows = sft_rows(prepared, cfg.sft.mix, cfg.sft.steps * cfg.sft.batch_size, seed)
        model, info["phase1"] = _sft(model, tokenizer, rows, cfg.sft, cfg, seed, work_dir / "run1")
        model.save_pretrained(phase1)
        tokenizer.save_pretrained(phase1)
        (phase1 / "stamp").write_text(stamp)
    model, tokenizer = load_checkpoint(phase1)
    roles = cfg.sft.roles
    if roles is not None and roles.steps > 0:
        torch.manual_seed(seed + 1)
        rows = sft_rows(prepared, roles.mix, roles.steps * cfg.sft.batch_size, seed + 1)
        model, info["phase2"] = _sft(model, tokenizer, rows, roles, cfg, seed + 1, work_dir / "run2")
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    last = info.get("phase2") or info.get("phase1") or {}
    return {"parameters": sum(p.numel() for p in model.parameters()),
            "vocab_size": len(tokenizer), "sft_steps": cfg.sft.steps,
            "role_steps": roles.steps if roles is not None else 0,
            "final_loss": last.get("final_loss"), "phases": info}


def train_judge(prepared: Path, base_dir: Path, out_dir: Path, cfg, seed: int, work_dir: Path) -> dict:
    """The tiny world's judge: a copy of the base fine-tuned on `world.roles.judge_rows` alone
    (`base_model.judge`: steps, learning rate, warm-up; batch size of `base_model.sft`).

    An external RLME evaluator (a model directory): it forgets how to solve problems, which a
    judge does not need, and learns to catch a wrong box. Its rows are the prepared
    `judge_train` minimal pairs, whose problems no policy trains or is scored on
    (world/generate.py `role_pool`); the SFT stream samples them with replacement (drawn with
    `seed`) and trains with `judge.seed`. Learning the comparison is a sudden transition whose timing depends on that
    seed and even on the thread count (1200 steps gave AUROC 0.56-0.76 across seeds and runs;
    docs/results.md), which is why the seed is a parameter and the default trains 2400 steps.
    """
    import torch

    from models.policy import load_policy

    rng = random.Random(seed)
    pool = [(e["prompt"], e["demonstration"]) for e in read_jsonl(prepared / "judge_train.jsonl")]
    judge = cfg.judge
    rows = [dict(zip(("prompt", "completion"), rng.choice(pool)))
            for _ in range(judge.steps * cfg.sft.batch_size)]
    rng.shuffle(rows)
    torch.manual_seed(judge.seed)
    model, tokenizer = load_policy(base_dir, for_training=True)
    model, info = _sft(model, tokenizer, rows, judge, cfg, judge.seed, Path(work_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return {"steps": judge.steps, "rows": len(pool), **info}
