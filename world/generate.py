"""Write every family of the tiny world, deterministically from one seed, as JSONL per split.

Each family gets its own `random.Random` derived from (seed, family name), so adding a family or
changing one family's size leaves the others' rows identical. The opt-in settings draw from
streams of their own too (`<family>:copy`, `<family>:dump`), so turning one on changes only the
demonstrations it replaces, and leaving them off writes the files the world always wrote.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from core.io import write_jsonl
from world import arith, arith_ref, facts, pairs, roles

# `arith_ref` is written only when `world.arith_ref` sets its sizes.
FAMILIES = ("arith", "arith_cf", "facts", "pairs", "evaluator", "rubricator", "judge", "arith_ref")


def _rng(seed: int, family: str, split: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{family}:{split}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def generate_world(cfg, out_dir: str | Path) -> dict[str, int]:
    """Generate all families into `out_dir/<family>_<split>.jsonl`; returns row counts."""
    out_dir = Path(out_dir)
    a, f, p, cf = cfg.arith, cfg.facts, cfg.pairs, cfg.counterfactual
    jobs = {}
    for split, n in (("train", a.n_train), ("val", a.n_val), ("test", a.n_test)):
        jobs[("arith", split)] = lambda r, s=split, n=n: arith.generate(
            r, n, s, min_ops=a.min_ops, max_ops=a.max_ops, max_value=a.max_value,
            sloppy_frac=a.sloppy_frac if s == "train" else 0.0, hint_frac=0.0)
    # arith_cf's val split only when asked for (`counterfactual.n_val`; a run training on arith_cf
    # needs its held-out curve): the world of record has none.
    cf_splits = (("train", cf.n_train), ("val", cf.n_val), ("test", cf.n_test))
    for split, n in ((s, n) for s, n in cf_splits if n > 0):
        jobs[("arith_cf", split)] = lambda r, s=split, n=n: arith.generate(
            r, n, s, min_ops=a.min_ops, max_ops=a.max_ops, max_value=a.max_value,
            sloppy_frac=0.0, hint_frac=1.0, family="arith_cf",
            copy_frac=cf.copy_frac if s == "train" else 0.0,
            copy_rng=_rng(cfg.seed, "arith_cf:copy", s))
    for split, n in (("train", f.n_train), ("val", f.n_val), ("test", f.n_test)):
        jobs[("facts", split)] = lambda r, s=split, n=n: facts.generate(
            r, n, s, drop_frac=f.drop_frac if s == "train" else 0.0,
            wrong_style_frac=f.wrong_style_frac if s == "train" else 0.0,
            dump_frac=f.dump_frac if s == "train" else 0.0, dump_repeats=f.dump_repeats,
            dump_rng=_rng(cfg.seed, "facts:dump", s), min_keys=f.min_keys,
            values_per_fact=f.values_per_fact)
    for split, n in (("train", p.n_train), ("val", p.n_val), ("test", p.n_test)):
        jobs[("pairs", split)] = lambda r, s=split, n=n: pairs.generate(
            r, n, s, min_ops=a.min_ops, max_ops=a.max_ops, max_value=a.max_value)
    ref = cfg.arith_ref
    if ref.enabled:  # off by default: no rows, no files
        for split, n in (("train", ref.n_train), ("val", ref.n_val), ("test", ref.n_test)):
            jobs[("arith_ref", split)] = lambda r, s=split, n=n: arith_ref.generate(
                r, n, s, min_ops=a.min_ops, max_ops=a.max_ops, max_value=a.max_value,
                separator=ref.separator, slip_frac=ref.slip_frac if s == "train" else 0.0)
    made = {}
    for (family, split), make in jobs.items():
        made[(family, split)] = make(_rng(cfg.seed, family, split))
    # Role families (SFT only): examples per problem of the role pool (the evaluator may have
    # several). The pool is arith problems drawn like the train split but from a stream of their
    # own, with every question GRPO trains or is scored on removed: the evaluator RLME trusts and
    # the judge never saw the gold of a problem the policy is rewarded on.
    pool = role_pool(cfg, made)
    ev = cfg.evaluator
    for family, make, per in (
            ("evaluator", lambda r, row: roles.evaluator_row(r, row, ev.kinds, ev.process_question),
             ev.per_problem),
            ("rubricator", roles.rubricator_row, 1)):
        made[(family, "train")] = roles.generate(_rng(cfg.seed, family, "train"), pool, make, per)
    # The judge's minimal pairs (2-3 rows per problem): what teaches the base to catch a wrong box.
    rng = _rng(cfg.seed, "judge", "train")
    made[("judge", "train")] = [e for r in pool for e in roles.judge_rows(rng, r)]
    counts = {}
    for (family, split), rows in made.items():
        write_jsonl(out_dir / f"{family}_{split}.jsonl", rows)
        counts[f"{family}_{split}"] = len(rows)
    return counts


def role_pool(cfg, made: dict[tuple[str, str], list[dict]]) -> list[dict]:
    """`arith.n_train` problems for the role families, none of whose questions appears in any
    split of a family the policy is trained or scored on (arith, arith_cf, arith_ref, pairs).

    Drawn from the `arith:roles` stream in rounds until full, so the pool's size never depends on
    how many draws collided; rows keep the train split's schema and ids (`arith-train-NNNNN`), so
    role rows are named as before.
    """
    a = cfg.arith
    taken = {r["question"] for rows in made.values() for r in rows if "question" in r}
    rng = _rng(cfg.seed, "arith:roles", "train")
    pool: list[dict] = []
    while len(pool) < a.n_train:
        drawn = arith.generate(rng, a.n_train - len(pool), "train", min_ops=a.min_ops,
                               max_ops=a.max_ops, max_value=a.max_value, sloppy_frac=a.sloppy_frac,
                               hint_frac=0.0)
        for row in drawn:
            if row["question"] not in taken:
                taken.add(row["question"])
                pool.append({**row, "id": f"arith-train-{len(pool):05d}"})
    return pool
