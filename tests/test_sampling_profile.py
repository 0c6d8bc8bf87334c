"""The sampler's per-step profile (`python -m benchmarks.sampling --profile`): profiler ops land in
the parts a reader expects, and the speed page's block renders a record's rows and shares."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks import sampling as bs
from benchmarks import tables

MATMUL, ATTENTION, WRITES, SAMPLING, ELEMENTWISE, ROWS, OTHER = bs.PARTS


@pytest.mark.parametrize(("op", "part"), [
    ("aten::linear", MATMUL), ("aten::mm", MATMUL), ("aten::addmm", MATMUL), ("bmm", MATMUL),
    ("aten::scaled_dot_product_attention", ATTENTION),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", ATTENTION),
    ("aten::copy_", WRITES), ("aten::index_copy_", WRITES),
    ("aten::multinomial", SAMPLING), ("aten::softmax", SAMPLING), ("aten::topk", SAMPLING),
    ("aten::sort", SAMPLING), ("aten::argmax", SAMPLING),
    ("aten::mul", ELEMENTWISE), ("aten::silu", ELEMENTWISE), ("aten::rsqrt", ELEMENTWISE),
    ("aten::cat", ELEMENTWISE),
    ("aten::index", ROWS), ("aten::index_select", ROWS),
    ("aten::slice", OTHER), ("aten::embedding", OTHER), ("aten::never_heard_of", OTHER),
])
def test_ops_land_in_their_parts(op, part) -> None:
    assert bs.part_of(op) == part


def test_time_is_charged_to_the_top_level_op() -> None:
    """A child's time counts under its top-level op: `exponential_` under `multinomial` is
    sampling, a `copy_` under `to` is not a cache write."""
    mm = SimpleNamespace(name="aten::linear", cpu_parent=None, cpu_time_total=60.0)
    draw = SimpleNamespace(name="aten::multinomial", cpu_parent=None, cpu_time_total=30.0)
    to = SimpleNamespace(name="aten::to", cpu_parent=None, cpu_time_total=10.0)
    children = [SimpleNamespace(name="aten::mm", cpu_parent=mm, cpu_time_total=59.0),
                SimpleNamespace(name="aten::exponential_", cpu_parent=draw, cpu_time_total=29.0),
                SimpleNamespace(name="aten::copy_", cpu_parent=to, cpu_time_total=9.0)]
    parts = bs.group_profile([mm, draw, to, *children])
    assert parts[MATMUL] == 0.6 and parts[SAMPLING] == 0.3 and parts[OTHER] == 0.1
    assert parts[WRITES] == 0.0 and sum(parts.values()) == pytest.approx(1.0)


RECORD = {
    "shapes": [{"name": "rollout (32 rows)", "rows": 32, "steps": 64, "seconds_per_step": 0.004,
                "parts": {MATMUL: 0.5, ATTENTION: 0.25, WRITES: 0.05, SAMPLING: 0.1,
                          ELEMENTWISE: 0.06, ROWS: 0.0, OTHER: 0.04},
                "kv_bytes_per_step": 2_000_000, "matmul_gflop_per_step": 0.12}],
    "quick": True, "threads": 1,
    "machine": {"cpu": "x86_64", "cores": 2, "threads": 1, "torch": "2.x", "parameters": 1000},
}


def test_the_block_renders_rows_and_shares() -> None:
    text = tables.sampling_profile_table(RECORD)
    header, _, row = text.splitlines()[:3]
    cells = [c.strip() for c in row.strip("|").split("|")]
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert dict(zip(columns, cells)) == {
        "shape": "rollout (32 rows)", "rows": "32", "ms/step": "4.0", "matmuls %": "50",
        "attention %": "25", "KV writes %": "5", "sampling %": "10", "elementwise %": "6",
        "row selection %": "0", "other %": "4", "KV MB/step": "2.0", "matmul GFLOP/step": "0.12",
        "attention GB/s": "2.0", "matmul GFLOP/s": "60.0", "`generate` ms/step": "",
        "goal ms/step": "", "1-row ms/step": "", "floor ms/step": "",  # a record from before those columns: blank
        "matmuls + SDPA ms/step": "3.0", "ceiling": ""}
    assert "1 torch thread(s)" in text and "(--quick)" in text
    assert text.rstrip().endswith("`benchmarks/results/sampling_profile.json`.")


def test_the_goal_and_the_one_row_floor_are_rendered() -> None:
    """The goal is a third of `generate`'s time per step; the 1-row time is the loop's fixed cost."""
    record = {**RECORD, "matmul_peak_gflops": 60.0,
              "shapes": [{**RECORD["shapes"][0], "hf_seconds_per_step": 0.012,
                          "one_row_seconds_per_step": 0.0025}]}
    header, _, row = tables.sampling_profile_table(record).splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")],
                     [c.strip() for c in row.strip("|").split("|")]))
    # floor: 2.5 ms plus 0.12 GFLOP at 60 GFLOP/s (2 ms)
    assert (cells["`generate` ms/step"], cells["goal ms/step"], cells["1-row ms/step"],
            cells["floor ms/step"]) == ("12.0", "4.0", "2.5", "4.5")


def test_the_ceiling_is_generate_over_the_kernels_it_shares() -> None:
    """Matmuls (50%) and SDPA (25%) of a 4 ms step are 3 ms, the same kernels `generate` runs:
    a 12 ms `generate` step caps any loop that keeps them at 4x; at 6 ms, at 2x (short of 3x)."""
    for hf, ceiling in ((0.012, "4.00x"), (0.006, "2.00x")):
        record = {**RECORD, "shapes": [{**RECORD["shapes"][0], "hf_seconds_per_step": hf}]}
        header, _, row = tables.sampling_profile_table(record).splitlines()[:3]
        cells = dict(zip([c.strip() for c in header.strip("|").split("|")],
                         [c.strip() for c in row.strip("|").split("|")]))
        assert (cells["matmuls + SDPA ms/step"], cells["ceiling"]) == ("3.0", ceiling)


def test_a_missing_record_says_how_to_make_it(monkeypatch) -> None:
    monkeypatch.setattr(tables, "_load", lambda name: None)
    assert "python -m benchmarks.sampling --profile" in tables.sampling_profile_table()
