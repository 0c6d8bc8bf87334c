"""User errors end in one clear line and exit code 2, never a library traceback."""

import subprocess
import sys

import yaml

from core.params import PARAMS_FILE, ROOT


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_unknown_method_lists_known():
    r = run("flows.train", "--method", "rlvx", "--preset", "ci")
    assert r.returncode == 2
    assert "unknown method 'rlvx'; known methods:" in r.stderr and "rlvr" in r.stderr
    assert "Traceback" not in r.stderr


def test_misspelt_params_key_is_named(tmp_path):
    raw = yaml.safe_load(PARAMS_FILE.read_text())
    raw["grpo"]["learning_rat"] = 1e-4
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(raw))
    r = run("flows.prepare", "--params", str(bad))
    assert r.returncode == 2
    assert "grpo.learning_rat: unknown key" in r.stderr and "Traceback" not in r.stderr


def test_unknown_preset(tmp_path):
    r = run("flows.prepare", "--preset", "tiny-typo")
    assert r.returncode == 2 and "preset 'tiny-typo' is not defined" in r.stderr


def test_evaluating_a_run_without_its_checkpoint_names_the_checkpoint():
    """A fresh clone has a run's record (run.json) but not its weights (DVC's cache): evaluating it
    says the training's checkpoint is missing and how to make it, not "build the base model"."""
    r = run("flows.evaluate", "--method", "rlvr", "--seed", "97")  # a seed no checkout trains
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no trained checkpoint of rlvr seed 97" in r.stderr and "flows.train --method rlvr --seed 97" in r.stderr
    assert "build the base model" not in r.stderr
