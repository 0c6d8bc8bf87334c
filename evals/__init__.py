"""Held-out benchmarks: each a loader plus metrics, run on any policy (issue 2 §7, issue 9).

`registry` names them (tiny world and local GSM8K / MATH / IFEval files), `external` loads and
scores the local files, `metrics` holds the pure maths (pass@k, self-BLEU, pooling), and `suite`
runs a policy on them.
"""
