"""Held-out benchmarks: each a loader plus metrics, run on any policy.

What is measured and how: docs/methods/shared.md (Evaluation).

`registry` names them (tiny world and local GSM8K / MATH / IFEval files), `external` loads and
scores the local files, `metrics` holds the pure maths (pass@k, self-BLEU, pooling), and `suite`
runs a policy on them. `items` is the per-item score file beside each evaluation's metrics, and
`claims` the papers' claims with their verdicts from the study's runs (the report's claims table).
"""
