"""Command-line plumbing shared by the stage entry points: one clear line for user errors."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from core.io import DataError
from core.params import ParamsError

# Errors a user can cause (bad params, bad rows, missing inputs, unknown names): no traceback.
USER_ERRORS = (ParamsError, DataError, FileNotFoundError, LookupError)


def quiet_libraries() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # force: importing prefect installs a WARNING-level root handler that would hide our INFO logs.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", force=True)
    for noisy in ("httpx", "urllib3", "alembic", "datasets"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--preset", default=None, help="a name under `presets` in params.yaml")
    p.add_argument("--params", default=None, help="params file (default: params.yaml)")
    return p


def run_main(fn: Callable[[], object]) -> None:
    """Run a stage; user errors print `error: ...` and exit 2 instead of a library traceback."""
    quiet_libraries()
    try:
        fn()
    except USER_ERRORS as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {msg}", file=sys.stderr)
        sys.exit(2)
