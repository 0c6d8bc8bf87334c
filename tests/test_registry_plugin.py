"""A reward method plugs in at one place (core/methods.py): a new method is its module, one
`Method` entry in `METHODS` (with the pydantic model of its settings) and its `reward.<name>`
block in params.yaml. The toy method here is built from exactly those three, and everything
downstream picks it up: params validation (its block, its variants, a misspelt key named), the
training curves (its metrics), its plan, its reward version and its run configs. A name absent
from the registry is refused, and no shared code names a method."""

import ast
import copy
import sys

import pytest
import yaml
from pydantic import Field

from core import methods
from core.params import PARAMS_FILE, ROOT, MethodBase, ParamsError, validate

RAW = yaml.safe_load(PARAMS_FILE.read_text())

# 1. The method's module (written to a temporary folder: nothing in the repository changes).
TOY_MODULE = '''
VERSION = "7"


def toy_parity(prompts, completions, **kwargs):
    return [float(len(c) % 2) for c in completions]


class Counter:
    def metrics(self):
        return {"toy/parity_rate": 0.5}


def build(ctx):
    from rewards import MethodPlan

    return MethodPlan(reward_funcs=[toy_parity], loggers=[Counter()])
'''


# 2. Its settings model and registry entry.
class ToyReward(MethodBase):
    bonus: float = Field(ge=0)


TOY = methods.Method(ToyReward, builder="toy_method:build", version="toy_method", metrics=("toy/",))


@pytest.fixture
def raw(tmp_path, monkeypatch):
    (tmp_path / "toy_method.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(methods.METHODS, "toy", TOY)
    # 3. Its params block (and a variant of it, trained alongside).
    raw = copy.deepcopy(RAW)
    raw["reward"]["toy"] = {"task": "arith", "bonus": 0.5}
    raw["variants"]["toy_big"] = {"method": "toy", "reward": {"bonus": 2.0}}
    raw["methods"] = [*raw["methods"], "toy", "toy_big"]
    yield raw
    sys.modules.pop("toy_method", None)


def test_the_toy_method_and_its_variant_validate(raw):
    params = validate(raw)
    assert params.method_config("toy") == ("toy", ToyReward(task="arith", bonus=0.5))
    run = params.resolve("toy_big")
    assert (run.name, run.family, run.cfg.bonus, run.grpo.task) == ("toy_big", "toy", 2.0, "arith")


def test_a_misspelt_key_of_the_toy_block_is_named(raw):
    raw["reward"]["toy"]["bonsu"] = raw["reward"]["toy"].pop("bonus")
    with pytest.raises(ParamsError) as e:
        validate(raw)
    assert str(e.value) == "params.yaml: reward.toy.bonsu: unknown key (did you mean bonus?)"


def test_the_toy_block_is_required_and_checked(raw):
    bad = copy.deepcopy(raw)
    bad["reward"]["toy"]["bonus"] = -1
    with pytest.raises(ParamsError, match=r"reward\.toy\.bonus: Input should be greater than or equal to 0"):
        validate(bad)
    del raw["reward"]["toy"]
    with pytest.raises(ParamsError, match=r"reward\.toy: Field required"):
        validate(raw)


def test_the_toy_metrics_are_kept_in_the_training_curves(raw):
    from flows.train import curves

    history = [{"step": 1, "reward": 0.2, "toy/parity_rate": 0.5, "elsewhere/x": 1.0}]
    assert curves(history) == [{"step": 1, "reward": 0.2, "toy/parity_rate": 0.5}]


def test_metrics_of_an_unregistered_prefix_are_not_kept():
    from flows.train import curves

    assert "toy/parity_rate" not in curves([{"step": 1, "reward": 0.2, "toy/parity_rate": 0.5}])[0]


def test_the_toy_plan_version_and_run_configs(raw, tmp_path):
    from flows.configure import configure, evaluate_config, train_config
    from flows.train import make_plan
    from rewards import reward_version

    params = validate(raw)
    plan = make_plan(params, "toy_big", 0, None, None)
    assert [f.__name__ for f in plan.reward_funcs] == ["toy_parity"]
    assert plan.loggers[0].metrics() == {"toy/parity_rate": 0.5}
    assert reward_version("toy") == "7"
    config = train_config(params, "toy_big")
    assert (config["family"], config["reward"]["bonus"], config["grpo"]["task"]) == ("toy", 2.0, "arith")
    assert evaluate_config(params, "toy")["family"] == "toy"
    written = configure(params, tmp_path)
    assert {"toy/train.json", "toy_big/evaluate.json"} <= set(written)


def test_a_method_absent_from_the_registry_is_refused():
    raw = copy.deepcopy(RAW)
    raw["variants"]["toy_big"] = {"method": "toy", "reward": {}}
    with pytest.raises(ParamsError) as e:
        validate(raw)
    known = ", ".join(sorted(methods.METHODS))
    assert str(e.value) == (f"params.yaml: variants.toy_big.method: unknown method 'toy'; "
                            f"known methods: {known}")
    raw = copy.deepcopy(RAW)
    raw["reward"]["toy"] = {"bonus": 0.5}  # a block without an entry
    with pytest.raises(ParamsError, match=r"reward\.toy: unknown key"):
        validate(raw)


def test_no_shared_code_names_a_method():
    """Outside the registry and the methods' own code (rewards/, models/), no module compares a
    name with a method's or lists methods: a method-specific branch belongs in its entry."""
    names = set(methods.METHODS)
    found = []
    for package in ("core", "world", "evals", "synthesis", "tasks", "flows"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "core" / "methods.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Compare):
                    consts = [node.left, *node.comparators]
                elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    consts = node.elts
                else:
                    continue
                hits = [c.value for c in consts if isinstance(c, ast.Constant) and c.value in names]
                if hits and (isinstance(node, ast.Compare) or len(hits) > 1):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {hits}")
    assert not found, found
