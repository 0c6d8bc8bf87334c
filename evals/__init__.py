"""Held-out benchmarks: each a loader plus metrics, run on any policy (issue 2 §7, issue 9)."""
