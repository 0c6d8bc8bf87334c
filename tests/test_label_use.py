"""Which labels each reward reads, measured: change one input field of a fixed batch at a time and
see whether the rewards move (issue 30, "Label use measured and stated").

Each case builds the method's real plan and TRL trainer (the `ci` preset's settings, as
tests/test_ranks.py does) on a tiny random Llama, replaces generation by a fixed table of
completions (TRL's `rollout_func` hook; RLCER's rubricator by fixed rubric texts) and runs TRL's
`_generate_and_score_completions` once: the rewards every reward function gave and the advantages.
The rows reach the reward functions as in training (`flows.train.task_rows`: every column of the
prepared file but the SFT demonstration), so a reward can read any of them. Then, one field at a
time, the same batch with that field changed (and nothing else: the completions stay the ones
written for the original rows) is scored again by a freshly built plan and trainer; the field is
"read" when a reward or an advantage moves. The unchanged batch is scored twice first, so a method
whose rewards move without cause (a reward stream drawn per call) cannot pass for one that reads.

The fields, per task (`FIELDS`): arith rows carry the hint of `arith_cf` (the nocheat setting: the
true answer planted in the prompt), so the arith cases also show which rewards read the prompt.

The observed table is committed as docs/methods/label_use.json, and the "reads" table of
docs/methods/README.md (a generated block) is rendered from it; both are checked here. After a
reward's inputs change on purpose: `python -m tests.test_label_use --write` measures again and
rewrites both.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import sys
import zlib
from pathlib import Path

import pytest

from tests.test_ranks import _completion  # the same four completions per prompt

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "methods" / "label_use.json"
DOC = ROOT / "docs" / "methods" / "README.md"
BEGIN = "<!-- label-use:begin (python -m tests.test_label_use --write) -->"
END = "<!-- label-use:end -->"

P, G = 4, 4  # prompts of the fixed batch, completions per prompt

# The methods (every registered one) and the variants whose label use differs from their family's.
CASES = ("rlvr", "random", "rlme", "rlme_gt10", "rlvr_rlme", "rlvrr", "dro", "ref_logprob", "rlcer",
         "rationale", "genrm_outcome", "rationale_ap_only", "ttrl", "empo", "self_certainty",
         "entropy", "format", "incorrect")

# field -> (the tasks whose rows carry it, its kind, what it is). Kinds: label (a gold answer, a
# preference label or human rationales: what a label-free reward must not read), reference (reference
# texts, which RLVRR and DRO use in place of a verifiable answer), prompt (the prompt text itself).
FIELDS = {
    "answer": (("arith",), "label", "the gold answer (column `answer`)"),
    "reference": (("arith",), "reference", "the reference solution (column `reference`), whose last "
                                           "sentence is DRO's reference answer"),
    "hint": (("arith",), "prompt", "the answer planted in the prompt (`arith_cf`: `Hint: the answer "
                                   "is H.` in the prompt text, and column `hint`): read by every reward "
                                   "conditioned on the prompt"),
    "references": (("facts",), "reference", "the reference descriptions (column `references`) and the "
                                            "RLVRR components synthesized from them"),
    "gold_facts": (("facts",), "label", "the gold fact list (column `gold_facts`, the coverage "
                                        "metric's truth)"),
    "checklist": (("pairs",), "label", "the human rationales (column `checklist`)"),
    "label": (("pairs",), "label", "the preference label (columns `label` and `verdict`)"),
}

# What each case must read (the papers' specifications); every other field of its task unread.
EXPECTED = {
    "rlvr": {"answer"},
    "random": set(),
    "rlme": {"hint"},                    # the live evaluator reads the problem, hint included
    "rlme_gt10": {"answer", "hint"},     # anchoring states the gold on 10% of prompts
    "rlvr_rlme": {"answer", "hint"},
    "rlvrr": {"references"},
    "dro": {"reference", "hint"},        # R3 of the reference answer after the prompt and CoT
    "ref_logprob": {"reference", "hint"},  # its mean log-probability, the same pass
    "rlcer": {"answer", "hint"},         # the reasoner's ±1 outcome; the rubricator reads the prompt
    "rationale": {"checklist", "label"},
    "genrm_outcome": {"label"},
    "rationale_ap_only": {"checklist"},
    "ttrl": set(),
    "empo": set(),                       # the group's own answer clusters
    "self_certainty": {"hint"},
    "entropy": {"hint"},
    "format": set(),
    "incorrect": {"answer"},
}

RUBRICS = (
    ' [{"criterion": "each step\'s arithmetic is correct", "points": 3}, '
    '{"criterion": "contains an arithmetic slip", "points": -4}]',
    ' [{"criterion": "the boxed answer matches the last step", "points": 2}]',
    ' [{"criterion": "ends with the boxed answer", "points": 1}, {"criterion": "repeats the question", "points": -1}]',
    " not a rubric list",
)
# A moved reward differs by more than this; the unchanged batch scored twice must agree exactly.
MOVED = 1e-6


# --- the fixed batch ------------------------------------------------------------------------------

def _world_rows(task: str) -> list[dict]:
    """P rows of the task as the world writes them; arith rows are `arith_cf`'s (true hints), with
    one prompt that the 10% anchoring of `rlme_gt10` anchors, so that variant is not vacuous."""
    from rewards.meta_eval import anchored
    from world import arith, facts, pairs

    rng = random.Random(7)
    if task == "arith":
        raw = arith.generate(rng, 40, "train", min_ops=1, max_ops=3, max_value=99, sloppy_frac=0.0,
                             hint_frac=1.0, family="arith_cf")
        hit = next(r for r in raw if anchored(r["id"], 0.1, 0))
        return [hit] + [r for r in raw if r is not hit and not anchored(r["id"], 0.1, 0)][:P - 1]
    if task == "facts":
        return facts.generate(rng, P, "train", drop_frac=0.0, wrong_style_frac=0.0)
    return pairs.generate(rng, P, "train", min_ops=1, max_ops=3, max_value=30)


def _train_rows(raw: list[dict], tmp: Path) -> list[dict]:
    """The rows as GRPO training passes them to the reward functions (flows.train.task_rows)."""
    from core.io import write_jsonl
    from flows.train import task_rows

    tmp.mkdir(parents=True, exist_ok=True)
    write_jsonl(tmp / "x_train.jsonl", raw)
    return task_rows(tmp, "x")


def _other(word: str, pool: list[str]) -> str:
    return next(w for w in pool if w != word)


def perturb(field: str, row: dict) -> dict:
    """`row` with `field` changed and nothing else.

    >>> perturb("answer", {"answer": "12", "reference": "x"})
    {'answer': '19', 'reference': 'x'}
    >>> perturb("hint", {"prompt": "P Hint: the answer is 4.\\nSolution:", "hint": "4"})["prompt"]
    'P Hint: the answer is 7.\\nSolution:'
    """
    from world import facts

    row = dict(row)
    if field == "answer":
        row["answer"] = str(int(row["answer"]) + 7)
    elif field == "reference":
        gold = row["answer"]
        row["reference"] = row["reference"].replace(f"\\boxed{{{gold}}}", f"\\boxed{{{int(gold) + 7}}}")
    elif field == "hint":
        new = str(int(row["hint"]) + 3)
        row["prompt"] = row["prompt"].replace(f"Hint: the answer is {row['hint']}.",
                                              f"Hint: the answer is {new}.")
        row["hint"] = new
    elif field == "references":  # every attribute said in the references becomes another value
        swap = {v: _other(v, vals) for vals in facts.ATTRS.values() for v in vals}
        row["references"] = [re.sub(r"[a-z]+", lambda m: swap.get(m.group(0), m.group(0)), ref)
                             for ref in row["references"]]
    elif field == "gold_facts":
        row["gold_facts"] = list(reversed(row["gold_facts"]))[:-1] + ["nothing"]
    elif field == "checklist":
        row["checklist"] = ["Response A never states which quantity it counts."]
    elif field == "label":
        row["label"] = {"A": "B", "B": "A"}[row["label"]]
        row["verdict"] = row["verdict"].replace("A", "X").replace("B", "A").replace("X", "B")
    else:
        raise KeyError(f"unknown field {field!r}; known: {sorted(FIELDS)}")
    return row


# --- scoring one batch ----------------------------------------------------------------------------

def _write_components(rows: list[dict], folder: Path) -> Path:
    """RLVRR's components of the facts rows, synthesized from their references (rule backend)."""
    from core.params import SynthesizeConfig
    from synthesis import synthesize, write_components

    folder.mkdir(parents=True, exist_ok=True)
    made, stats = synthesize([{"id": r["prompt_id"], "prompt": r["prompt"], "references": r["references"]}
                              for r in rows], SynthesizeConfig())
    assert len(made) == len(rows), "every fixed facts row keeps its components"
    write_components(folder / "facts_train.jsonl", made, stats)
    (folder / "facts_val.jsonl").write_text("")
    return folder


def score(case: str, rows: list[dict], completions: list[list[str]], assets: Path, tag: str) -> dict:
    """Rewards (per reward function) and advantages of one batch under a freshly built plan."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from core.params import load
    from models.grpo import grpo_config
    from models.policy import load_policy
    from rewards import MethodContext, build_plan

    params = load(preset="ci")
    family, cfg = params.method_config(case)
    if family == "dro":  # no clipping: a random model's tiny P would all clip to one reward
        cfg = cfg.model_copy(update={"clip_low": 0.0, "clip_high": 1.0})
    g = params.method_grpo(case).model_copy(
        update={"prompts_per_step": P, "num_generations": G, "max_completion_length": 96})
    model, tokenizer = load_policy(assets / "base", for_training=True)
    components = _write_components(rows, assets / f"components-{case}-{tag}") if g.task == "facts" else None
    given = {"name": case, "family": family, "cfg": cfg, "grpo": g, "seed": 0, "policy": model,
             "tokenizer": tokenizer, "components": components}
    known = {f.name for f in dataclasses.fields(MethodContext)}
    plan = build_plan(MethodContext(**{k: v for k, v in given.items() if k in known}))
    args = grpo_config(g, seed=0, output_dir=assets / f"out-{case}-{tag}")
    trainer = (plan.trainer_cls or GRPOTrainer)(
        model=model, reward_funcs=list(plan.reward_funcs), args=args,
        train_dataset=Dataset.from_list(rows), processing_class=tokenizer, **plan.trainer_kwargs)
    for f in [*plan.reward_funcs, *plan.loggers]:
        if hasattr(f, "trainer"):
            f.trainer = trainer
    index = {r["prompt"]: i for i, r in enumerate(rows)}

    def rollout(prompts, trainer):
        seen: dict[str, int] = {}
        prompt_ids, completion_ids = [], []
        for p in prompts:
            j = seen[p] = seen.get(p, -1) + 1
            prompt_ids.append(tokenizer(p, add_special_tokens=False)["input_ids"])
            completion_ids.append(tokenizer(completions[index[p]][j], add_special_tokens=False)["input_ids"]
                                  + [tokenizer.eos_token_id])
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    trainer.rollout_func = rollout
    if family == "rlcer":  # the rubricator's sampling: a fixed rubric text chosen by its prompt

        def sample(prompts):
            texts = [RUBRICS[zlib.crc32(p.encode()) % len(RUBRICS)] for p in prompts]
            ids = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                   for t in texts]
            return [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts], ids, texts

        trainer.sample_rubricator = sample
    model.train()
    try:
        out = trainer._generate_and_score_completions([r for r in rows for _ in range(G)])
    finally:
        for f in plan.reward_funcs:
            if hasattr(f, "close"):  # RLVRR's sandbox worker
                f.close()
    return {"rewards": {k: list(v) for k, v in trainer._logs["rewards"].items()},
            "advantages": out["advantages"].tolist()}


def _gap(a: dict, b: dict) -> float:
    """The largest difference between two scorings' rewards and advantages (inf if shaped apart)."""
    import math

    pairs = [(a["advantages"], b["advantages"])] + [(a["rewards"][k], b["rewards"].get(k, [])) for k in a["rewards"]]
    gap = 0.0
    for x, y in pairs:
        if len(x) != len(y) or set(a["rewards"]) != set(b["rewards"]):
            return math.inf
        for u, v in zip(x, y):
            nan_u, nan_v = u != u, v != v  # a None reward is NaN in TRL's table
            gap = max(gap, 0.0 if nan_u and nan_v else math.inf if nan_u or nan_v else abs(u - v))
    return gap


def build_assets(folder: Path) -> Path:
    """A tokenizer of every text the batches hold and a tiny random Llama, heads sharpened so that
    the confidence rewards and the evaluators' log-probs spread as a trained model's do."""
    import torch

    from core.params import Arch
    from models.tiny import build_model, build_tokenizer

    texts = []
    for task in ("arith", "facts", "pairs"):
        raw = _world_rows(task)
        for field in (f for f, (tasks, *_) in FIELDS.items() if task in tasks):
            raw = raw + [perturb(field, r) for r in _world_rows(task)]
        texts += [r["prompt"] for r in raw]
        texts += [_completion(task, r, j) for r in _world_rows(task) for j in range(G)]
        texts += [ref for r in raw for ref in r.get("references", [])]
        texts += [c for r in raw for c in r.get("checklist", [])]
    texts += list(RUBRICS)
    tokenizer = build_tokenizer(texts, 400)
    arch = Arch(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, max_positions=512)
    model = build_model(arch, tokenizer, seed=0)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    model.save_pretrained(folder / "base")
    tokenizer.save_pretrained(folder / "base")
    return folder


def measure(assets: Path, cases: tuple[str, ...] = CASES) -> dict:
    """The label-use table: per case, its task and, per field of that task, whether it moved."""
    import torch

    from core.params import load

    torch.set_num_threads(1)
    params = load(preset="ci")
    methods = {}
    for case in cases:
        task = params.method_grpo(case).task
        raw = _world_rows(task)
        rows = _train_rows(raw, assets / "rows" / case / "base")
        completions = [[_completion(task, r, j) for j in range(G)] for r in raw]
        base = score(case, rows, completions, assets, "base")
        again = score(case, rows, completions, assets, "again")
        assert _gap(base, again) == 0.0, f"{case}: the unchanged batch scored twice gave other rewards"
        reads = {}
        for field in (f for f, (tasks, *_) in FIELDS.items() if task in tasks):
            changed = _train_rows([perturb(field, r) for r in raw], assets / "rows" / case / field)
            reads[field] = _gap(base, score(case, changed, completions, assets, field)) > MOVED
        methods[case] = {"family": params.method_config(case)[0], "task": task, "reads": reads}
    return {"fields": {f: {"tasks": list(t), "kind": k, "what": w} for f, (t, k, w) in FIELDS.items()},
            "methods": methods}


# --- the docs' table -----------------------------------------------------------------------------

def render(table: dict) -> str:
    """The markdown table of docs/methods/README.md's generated block, from label_use.json.

    >>> print(render({"fields": {"answer": {"tasks": ["arith"], "kind": "label", "what": "w"},
    ...                          "hint": {"tasks": ["arith"], "kind": "prompt", "what": "h"}},
    ...               "methods": {"rlvr": {"family": "rlvr", "task": "arith",
    ...                                    "reads": {"answer": True, "hint": False}}}}))
    | method | trains on | labels it reads | references it reads | reads the prompt |
    |---|---|---|---|---|
    | `rlvr` | arith | `answer` | none | no |
    """
    lines = ["| method | trains on | labels it reads | references it reads | reads the prompt |",
             "|---|---|---|---|---|"]
    kinds = {f: spec["kind"] for f, spec in table["fields"].items()}
    for name, m in table["methods"].items():
        read = {kind: [f"`{f}`" for f, hit in m["reads"].items() if hit and kinds[f] == kind]
                for kind in ("label", "reference", "prompt")}
        lines.append(f"| `{name}` | {m['task']} | {', '.join(read['label']) or 'none'} | "
                     f"{', '.join(read['reference']) or 'none'} | {'yes' if read['prompt'] else 'no'} |")
    return "\n".join(lines)


def replace_block(page: str, text: str) -> str:
    """`page` with what stands between the label-use markers replaced by `text`."""
    head, sep, rest = page.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise LookupError(f"{DOC} has no label-use block: add the lines {BEGIN} and {END}")
    return f"{head}{BEGIN}\n{text}\n{END}{tail}"


# --- the tests ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    return measure(build_assets(tmp_path_factory.mktemp("label_use")))


def test_each_method_reads_what_its_paper_specifies(measured) -> None:
    for case, m in measured["methods"].items():
        read = {f for f, hit in m["reads"].items() if hit}
        assert read == EXPECTED[case], f"{case} reads {sorted(read)}, expected {sorted(EXPECTED[case])}"


def test_the_label_free_methods_read_no_gold_answer(measured) -> None:
    """The issue's check: changing only the gold answers moves none of rlme, rlvrr, dro,
    ref_logprob, random, ttrl, empo, self_certainty, entropy, format; it moves rlvr, incorrect and
    rlcer."""
    reads = {c: m["reads"] for c, m in measured["methods"].items()}
    for case in ("rlme", "dro", "ref_logprob", "random", "ttrl", "empo", "self_certainty", "entropy",
                 "format"):
        assert reads[case]["answer"] is False, case
    for case in ("rlvrr",):
        assert reads[case] == {"references": True, "gold_facts": False}
    for case in ("rlvr", "incorrect", "rlcer"):
        assert reads[case]["answer"] is True, case
    assert reads["rationale"] == {"checklist": True, "label": True}


def test_every_registered_method_is_measured(measured) -> None:
    from core.methods import METHODS

    assert set(METHODS) <= set(measured["methods"])


def test_the_committed_table_is_the_measured_one(measured) -> None:
    committed = json.loads(TABLE.read_text())
    assert committed == measured, ("docs/methods/label_use.json is not what the rewards read now: "
                                   "python -m tests.test_label_use --write")


def test_the_docs_table_is_generated_from_the_committed_file() -> None:
    page = DOC.read_text(encoding="utf-8")
    assert replace_block(page, render(json.loads(TABLE.read_text()))) == page, (
        "docs/methods/README.md's label-use block differs from docs/methods/label_use.json: "
        "python -m tests.test_label_use --write")


def main(argv: list[str]) -> int:
    """`--write`: measure, then rewrite docs/methods/label_use.json and the docs' block."""
    import tempfile

    if argv != ["--write"]:
        print("usage: python -m tests.test_label_use --write", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        table = measure(build_assets(Path(tmp)))
    TABLE.write_text(json.dumps(table, indent=1) + "\n")
    DOC.write_text(replace_block(DOC.read_text(encoding="utf-8"), render(table)), encoding="utf-8")
    print(render(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
