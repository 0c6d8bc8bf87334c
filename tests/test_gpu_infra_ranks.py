"""The process group's timeout is the configured one (issue 66, defect 4).

`core.ranks.init` creates the process group before `TrainingArguments` exists, and accelerate's
state is a singleton: the `ddp_timeout` TRL gets later never reaches it. So the timeout must be
given to `init`. Here two gloo ranks run the held-out callback while rank 0 "evaluates" for
`WAIT_S` seconds and rank 1 waits in the verdict's broadcast (as on GPUs, where rank 0 alone
samples the held-out prompts): with a group timeout shorter than the wait, rank 1 is killed by
it; with the configured, longer one, both ranks come through. Before the fix `init` took no
timeout (torch's 10-minute NCCL default, 30 minutes under gloo, applied whatever params said).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from core.params import load

# Rank 0's held-out evaluation; a group timeout below it kills the waiting rank, one above it not.
WAIT_S = 5.0
SHORT_S, CONFIGURED_S = 2.0, 30.0


class _Weights:
    training = True

    def eval(self):
        self.training = False

    def train(self):
        self.training = True


def _worker(rank: int, world: int, port: int, timeout_s: float, out: str) -> None:
    import time
    from types import SimpleNamespace

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1"})
    from core import ranks
    from models.callbacks import HeldoutCallback

    result: dict = {"rank": rank}
    try:
        result["init"] = list(ranks.init(timeout_s=timeout_s))
        result["timeout_s"] = ranks.timeout_s()

        def score(model):  # rank 0 alone, as the held-out evaluation
            time.sleep(WAIT_S)
            return {"arith/pass@1": 0.5}

        cb = HeldoutCallback(score, every=1, headline="arith/pass@1")
        state = SimpleNamespace(global_step=0, log_history=[])
        control = SimpleNamespace(should_save=False, should_training_stop=False)
        started = time.monotonic()
        cb.on_train_begin(SimpleNamespace(output_dir=out), state, control, model=_Weights())
        result.update(ok=True, waited=time.monotonic() - started, history=len(cb.history))
    except Exception as e:  # noqa: BLE001 - the outcome is what the test reads
        result.update(ok=False, error=f"{type(e).__name__}: {e}"[:300])
    (Path(out) / f"rank{rank}.json").write_text(json.dumps(result))
    os._exit(0)  # no teardown: a rank whose peer timed out must not hang in destroy_process_group


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(timeout_s: float, out: Path) -> list[dict]:
    import torch.multiprocessing as mp

    out.mkdir()
    mp.start_processes(_worker, args=(2, _free_port(), timeout_s, str(out)), nprocs=2,
                       start_method="spawn", join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.timeout(120)
def test_the_configured_timeout_lets_the_ranks_wait_out_rank_0s_held_out_evaluation(tmp_path):
    short = _run(SHORT_S, tmp_path / "short")
    # The group really has the timeout it was given: rank 1 gives up waiting after SHORT_S.
    assert short[1]["ok"] is False, short[1]
    assert f"Timed out waiting {int(SHORT_S * 1000)}ms" in short[1]["error"], short[1]
    configured = _run(CONFIGURED_S, tmp_path / "configured")
    for r in configured:
        assert r["ok"], r
        assert r["init"] == [2, r["rank"], "gloo"] and r["timeout_s"] == CONFIGURED_S
    assert configured[0]["history"] == 1 and configured[1]["history"] == 0  # rank 0 evaluated
    assert configured[1]["waited"] >= WAIT_S - 0.5  # rank 1 waited it out in the broadcast


def test_the_timeout_is_a_param_and_the_gpu_presets_bound_their_held_out_prompts():
    """`grpo.ddp_timeout_s` is what the group gets; each GPU preset samples at most `heldout_n`
    held-out prompts per split (not `eval.n_test`, 500) on rank 0 while the others wait."""
    from core import ranks

    assert load().grpo.ddp_timeout_s == ranks.DEFAULT_TIMEOUT_S
    presets = [name for name in load().presets if name.endswith("gpu")]
    assert presets
    for name in presets:
        p = load(preset=name)
        assert p.eval.heldout_n is not None and p.eval.heldout_n < p.eval.n_test, name
        assert p.grpo.ddp_timeout_s >= 1800, name


def test_one_process_needs_no_group_and_reports_no_timeout(monkeypatch):
    from core import ranks

    for key in ("WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    assert ranks.init(timeout_s=5) == (1, 0, "none")
    assert ranks.timeout_s() is None
