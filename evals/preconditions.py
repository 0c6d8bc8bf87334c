"""Preconditions of the claims measured from code and the world, not from runs (`probe:` in
evals/claims.yaml; evals/claims.py calls each and records its result beside the verdict).

A probe takes no argument and returns {"value": float, "holds": bool | None, "detail": str}; it
must be deterministic (seeded world draws) and cheap, since the report stage computes it every
time, in a fresh clone too (it reads no DVC output).
"""

from __future__ import annotations

import random
import statistics
import tempfile
from functools import lru_cache
from pathlib import Path

# The probe's draws: 40 facts prompts of the world's generator, seeded (as
# tests/test_world_settings.py draws them).
PROBE_ROWS = 40
PROBE_SEED = 5


@lru_cache(maxsize=1)
def dump_pays_direct() -> dict:
    """Paper 002 Table 3's premise: under direct keyword matching, RLVRR's whole reward (content
    and style, as trained) pays a keyword dump more than an honest incomplete answer (a
    description that drops half the facts), so a policy that cannot write the complete
    description has a shortcut that ordered LCS does not pay. Also recorded: whether the dump
    beats the complete description under direct matching (the shortcut pays even a policy that
    can write it).

    Measured in the claim's setting: the fact tables and dumps of the `keyword_dump` preset's
    world (`world.facts.min_keys`, `values_per_fact`, `dump_repeats`).

    `value` is reward(dump) − reward(half description) under direct matching; holds iff > 0.
    """
    from core.params import SynthesizeConfig, load
    from rewards.rlvrr import RlvrrReward
    from synthesis import synthesize, write_components
    from world import facts

    setting = load(preset="keyword_dump").world.facts
    tables = dict(min_keys=setting.min_keys, values_per_fact=setting.values_per_fact)
    kw = dict(drop_frac=0.0, wrong_style_frac=0.0, **tables)
    faithful = facts.generate(random.Random(PROBE_SEED), PROBE_ROWS, "train", **kw)
    dumps = facts.generate(random.Random(PROBE_SEED), PROBE_ROWS, "train", **kw, dump_frac=1.0,
                           dump_repeats=setting.dump_repeats, dump_rng=random.Random(PROBE_SEED + 1))
    partial = facts.generate(random.Random(PROBE_SEED), PROBE_ROWS, "train", drop_frac=0.5,
                             wrong_style_frac=0.0, **tables)
    components, stats = synthesize(faithful, SynthesizeConfig())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "facts_train.jsonl"
        write_components(path, components, stats)

        def mean_reward(mode: str, rows: list[dict]) -> float:
            reward = RlvrrReward(path, mode=mode)
            return statistics.mean(reward(prompts=[r["prompt"] for r in rows],
                                          completions=[r["demonstration"] for r in rows],
                                          prompt_id=[r["id"] for r in rows]))

        got = {(mode, name): mean_reward(mode, rows) for mode in ("direct", "ordered")
               for name, rows in (("complete", faithful), ("dump", dumps), ("half", partial))}
    value = got["direct", "dump"] - got["direct", "half"]
    detail = ("RLVRR reward under direct matching: dump {:.3f}, half description {:.3f}, complete "
              "{:.3f}; under ordered LCS: dump {:.3f}, half {:.3f}, complete {:.3f} ({} seeded "
              "world prompts, keyword_dump's tables: min_keys {}, values_per_fact {})").format(
                  got["direct", "dump"], got["direct", "half"], got["direct", "complete"],
                  got["ordered", "dump"], got["ordered", "half"], got["ordered", "complete"],
                  PROBE_ROWS, setting.min_keys, setting.values_per_fact)
    return {"value": value, "holds": value > 0, "detail": detail}
