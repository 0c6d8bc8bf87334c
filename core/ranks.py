"""Which process this is, and the few collectives the lab needs when training runs on N ranks.

`accelerate launch` (torchrun underneath) starts one process per rank; TRL splits each generation
batch across them and gathers the rewards. Everything the lab adds on top (files, MLflow, held-out
evaluation, batch statistics of a reward, the collapse verdict) goes through these helpers:

- `is_main()`: the one process that writes files and talks to MLflow;
- `gather_objects(obj)`: every rank's `obj`, in rank order (TRL's own layout: rank r holds the
  r-th slice of the generation batch), so a batch statistic is computed over the global batch;
- `broadcast(obj)`: the main process's value on every rank (the early-stop decision);
- `local()`: a block that runs on one rank only (the held-out evaluation on the main process), in
  which the collectives above are the identity instead of waiting for ranks that never come.

Without an initialised `torch.distributed` process group (one process, the tests, evaluation) every
helper is the identity, so the reward functions behave exactly as before. torch is imported lazily:
`flows.train` reads the world size before anything heavy is loaded.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from core.params import GRPO

log = logging.getLogger(__name__)
T = TypeVar("T")

# Depth of `local()` blocks: inside one, the collectives are the identity.
_LOCAL = 0


def _group():
    """torch.distributed when a process group with more than one rank is up, else None."""
    if _LOCAL:
        return None
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def _env_int(*names: str, default: int) -> int:
    for name in names:
        if os.environ.get(name, "").strip().isdigit():
            return int(os.environ[name])
    return default


def world_size() -> int:
    """Number of ranks: the process group's size, else the launcher's `WORLD_SIZE`, else 1."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return _env_int("WORLD_SIZE", default=1)


def rank() -> int:
    """This process's rank (0 on the main process and without a launcher)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return _env_int("RANK", default=0)


def is_main() -> bool:
    """True on the one process that writes files and MLflow runs."""
    return rank() == 0


def gather_objects(obj: T) -> list[T]:
    """`[obj of rank 0, obj of rank 1, ...]` (picklable objects); `[obj]` on one process or inside
    `local()`. Every rank must call it, in the same order."""
    dist = _group()
    if dist is None:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def gather_rows(rows: list[T]) -> tuple[list[T], int]:
    """(the global batch, in rank order; where this rank's `rows` start in it)."""
    parts = gather_objects(list(rows))
    me = rank() if _group() is not None else 0
    return [r for part in parts for r in part], sum(len(p) for p in parts[:me])


def broadcast(obj: T, src: int = 0) -> T:
    """The value of `obj` on rank `src`, on every rank (identity on one process)."""
    dist = _group()
    if dist is None:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def barrier() -> None:
    dist = _group()
    if dist is not None:
        dist.barrier()


def on_main(fn: Callable[[], T]) -> T:
    """`fn()` computed on the main process only (inside `local()`), its result broadcast to all."""
    result: T | None = None
    if is_main():
        with local():
            result = fn()
    # The other ranks send None and receive the main rank's value: a T.
    return cast(T, broadcast(result))


@contextlib.contextmanager
def local() -> Iterator[None]:
    """Code that runs on one rank only: collectives inside are the identity (no rank waits)."""
    global _LOCAL
    _LOCAL += 1
    try:
        yield
    finally:
        _LOCAL -= 1


# The process group's collective timeout when none is given: params `grpo.ddp_timeout_s`'s
# default. torch's own (10 minutes for NCCL) is what the group got before it was passed.
DEFAULT_TIMEOUT_S = float(GRPO.model_fields["ddp_timeout_s"].default)
# The timeout the process group of this process was created with (None: not created here).
_TIMEOUT_S: float | None = None


def timeout_s() -> float | None:
    """Seconds a collective of this process's group may wait (as `init` created it), else None."""
    return _TIMEOUT_S


def init(timeout_s: float | None = None) -> tuple[int, int, str]:
    """Bring up the process group a launcher asked for (accelerate's `PartialState`, as the trainer
    would later: gloo on CPU, NCCL on GPUs, DeepSpeed's when `accelerate launch` configured it), so
    that rank-aware code can run before the trainer exists. Returns (world size, rank, backend);
    (1, 0, "none") without a launcher.

    `timeout_s` (params `grpo.ddp_timeout_s`; default `DEFAULT_TIMEOUT_S`) is the group's
    collective timeout. The group is created here, before `TrainingArguments` exists, and
    accelerate's state is a singleton: the `ddp_timeout` TRL is given later never reaches a group
    that is already up, so this is the one place a timeout can apply. Without it, torch's default
    (10 minutes under NCCL) let the watchdog kill the ranks waiting while rank 0 alone ran the
    step-0 held-out evaluation."""
    global _TIMEOUT_S
    if _env_int("WORLD_SIZE", default=1) <= 1 and "LOCAL_RANK" not in os.environ:
        return 1, 0, "none"
    from datetime import timedelta

    import torch
    from accelerate import PartialState

    seconds = float(timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S)
    created = not torch.distributed.is_initialized()  # a group already up keeps its own timeout
    state = PartialState(cpu=not torch.cuda.is_available(), timeout=timedelta(seconds=seconds))
    if created and torch.distributed.is_initialized():
        _TIMEOUT_S = seconds
    return state.num_processes, state.process_index, str(state.backend or "none")
