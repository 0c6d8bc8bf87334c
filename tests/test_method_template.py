"""The template a user copies to add a reward method (docs/templates/my_method.py, the checklist
in docs/adding_a_method.md) is registered here exactly as a real method is: its module on the
path, one `Method` entry in `METHODS`, its `reward.my_method` block and its arm in `methods:`.
Everything downstream must pick it up, so the template cannot rot while the registry moves on."""

import copy
import sys

import pytest
import yaml

from core import methods
from core.params import PARAMS_FILE, ROOT, ParamsError, validate

TEMPLATES = ROOT / "docs" / "templates"


@pytest.fixture
def raw(monkeypatch):
    monkeypatch.syspath_prepend(str(TEMPLATES))
    sys.modules.pop("my_method", None)
    import my_method

    # docs/adding_a_method.md, step 2: the registry entry.
    entry = methods.Method(my_method.MyMethodReward, builder="my_method:build", version="my_method")
    monkeypatch.setitem(methods.METHODS, "my_method", entry)
    # Steps 3 and 4: its params block (a comment above every key in the real file) and its arm.
    raw = copy.deepcopy(yaml.safe_load(PARAMS_FILE.read_text()))
    raw["reward"]["my_method"] = {"task": "arith", "weight": 0.5}
    raw["methods"] = [*raw["methods"], "my_method"]
    yield raw
    sys.modules.pop("my_method", None)


def test_the_template_validates_plans_and_scores(raw):
    from flows.train import make_plan
    from rewards import reward_version

    params = validate(raw)
    name, cfg = params.method_config("my_method")
    assert (name, cfg.weight, cfg.task) == ("my_method", 0.5, "arith")
    plan = make_plan(params, "my_method", 0, None, None)
    (reward,) = plan.reward_funcs
    assert reward(["p", "p"], ["so \\boxed{4}", "four"]) == [0.5, 0.0]
    # TRL's conversational completions (a list of messages) are read the same way.
    assert reward(["p"], [[{"role": "assistant", "content": "\\boxed{4}"}]]) == [0.5]
    assert reward_version("my_method") == "1"


def test_the_template_gets_its_run_configs_and_stages(raw, tmp_path):
    from flows.configure import configure, train_config

    params = validate(raw)
    assert train_config(params, "my_method")["family"] == "my_method"
    assert {"my_method/train.json", "my_method/evaluate.json"} <= set(configure(params, tmp_path))


def test_a_misspelt_key_of_the_template_block_is_named(raw):
    raw["reward"]["my_method"]["wieght"] = raw["reward"]["my_method"].pop("weight")
    with pytest.raises(ParamsError, match=r"reward\.my_method\.wieght: unknown key"):
        validate(raw)
