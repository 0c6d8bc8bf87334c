"""Every documented command is true: each fenced shell command of README.md and docs/**/*.md is
read and checked against the repository, so a renamed flag, target, stage, deployment or preset
fails here instead of in a newcomer's terminal.

Checked per command: a `make` target exists (`make -n`; the `python -m` line it runs is checked
too, with its `ARGS`); a `python -m` module exists and, for the lab's own modules, its arguments
parse with the module's own argparse parser (run up to `parse_args`, nothing after it), with the
methods, presets and studies they name existing; a `dvc` command names existing stages and params
keys, and its `exp show --drop/--keep` filters keep columns DVC really prints; a `prefect deployment
run` names a deployment of prefect.yaml and parameters of its flow; a script or copied file exists;
`LAB_PRESET=... a && b` is refused (the assignment reaches `a` only); an output path in a comment
under data/eval, data/checkpoints or data/plots has its `seed<S>/` level. Prose is checked for
presets that do not exist, for selecting a study preset in params.yaml before `dvc repro`, and for
values stated as params.yaml's ("`eval.n_test: 200` in params.yaml") that the file does not have;
the Makefile's `##` help is checked as prose.

`test_the_old_wrong_commands_fail` feeds the commands the issue found wrong and expects each to
fail; the slow test runs the cheap read-only DVC views in a fresh clone and checks their output.
Whether each documented command is run by a test, or why CI does not run it: tests/test_commands_docs.py.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import re
import runpy
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from core.params import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console", "zsh"}
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
_SPLIT = {"&&", "||", ";", "|", "&"}
# Modules of this repository (their flags are parsed); any other `python -m` (pytest, json.tool,
# nltk.downloader) only has to exist.
_OWN = {"flows", "benchmarks", "tasks", "evals", "core", "world", "models", "rewards", "synthesis"}
# data/<kind>/<run>/... paths: the run folder is always followed by seed<S>/ (base has none).
_SEEDED = re.compile(r"data/(?:eval|checkpoints|plots)/(?!base\b)([\w<>.-]+)/(?!seed)([\w<>.@-]+)")


# ------------------------------------------------------------------------------ the repository

@functools.cache
def raw_params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


@functools.cache
def params():
    from core.params import load

    return load()


def presets() -> set[str]:
    return set(raw_params().get("presets") or {})


@functools.cache
def study_presets() -> set[str]:
    from tasks.studies import study_presets as names

    return set(names(ROOT))


def arms(preset: str | None = None) -> set[str]:
    if preset:
        return set((raw_params()["presets"][preset] or {}).get("methods") or [])
    return set(raw_params()["methods"])


@functools.cache
def stages() -> set[str]:
    from tasks.stages import stage_graph

    names = set(stage_graph(ROOT))
    return names | {n.split("@", 1)[0] for n in names}  # `dvc repro train` names every train@...


@functools.cache
def deployments() -> dict[str, list[str]]:
    """'<flow name>/<deployment name>' -> the flow function's parameter names."""
    import inspect

    out = {}
    for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]:
        path, _, fn = d["entrypoint"].partition(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, fn)
        out[f"{flow.name}/{d['name']}"] = list(inspect.signature(flow.fn).parameters)
    return out


@functools.cache
def exp_show_columns() -> tuple[str, ...]:
    """The columns `dvc exp show` prints for this repository (read-only)."""
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "dvc"), "exp", "show", "--csv", "--no-pager"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return tuple(out.stdout.splitlines()[0].split(","))


def params_key_exists(key: str) -> bool:
    node: object = raw_params()
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


# ------------------------------------------------------------------------------ reading the docs

def shell_commands(text: str) -> list[tuple[int, str, str]]:
    """(line number, the command line with continuations joined, its comment) of every fenced
    shell block of a markdown text."""
    out = []
    for block in _FENCE.finditer(text):
        if block.group(1).lower() not in SHELLS:
            continue
        first = text.count("\n", 0, block.start(2)) + 1
        pending, start = "", first
        for i, line in enumerate(block.group(2).splitlines()):
            if not pending:
                start = first + i
            code, comment = _comment(line)
            if code.rstrip().endswith("\\"):
                pending += code.rstrip()[:-1] + " "
                continue
            command = (pending + code).strip()
            pending = ""
            if command or comment:
                out.append((start, command, comment))
    return out


def _comment(line: str) -> tuple[str, str]:
    """Split a shell line at its first unquoted `#` that starts a word."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1:]
    return line, ""


def simple_commands(command: str) -> list[list[str]]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    out: list[list[str]] = [[]]
    for token in lexer:
        if token in _SPLIT:
            out.append([])
        else:
            out[-1].append(token)
    return [words for words in out if words]


# ------------------------------------------------------------------------------ the checks

class Parsed(BaseException):  # not caught by a stage's `except Exception`
    def __init__(self, namespace: argparse.Namespace):
        self.namespace = namespace


def parse_module_args(module: str, args: list[str]) -> tuple[argparse.Namespace | None, str]:
    """Run `python -m module args` up to its argparse `parse_args` and stop there: (the parsed
    namespace, "") or (None, argparse's error). A module without argparse is not run."""
    spec = importlib.util.find_spec(module)
    source = Path(spec.origin).read_text() if spec and spec.origin else ""
    if "parse_args(" not in source:  # no parser: never run it
        return argparse.Namespace(), ""
    real = argparse.ArgumentParser.parse_args

    def stop(self, args=None, namespace=None):
        raise Parsed(real(self, args, namespace))

    err = io.StringIO()
    argv = sys.argv
    try:
        argparse.ArgumentParser.parse_args = stop  # type: ignore[method-assign]
        sys.argv = [module, *args]
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported before
            runpy.run_module(module, run_name="__main__", alter_sys=False)
    except Parsed as done:
        return done.namespace, ""
    except SystemExit as e:
        if e.code in (0, None):  # --help
            return argparse.Namespace(), ""
        return None, err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {e.code}"
    finally:
        argparse.ArgumentParser.parse_args = real  # type: ignore[method-assign]
        sys.argv = argv
    return None, "the module never parsed its arguments"


def check_python(module: str, args: list[str]) -> list[str]:
    if importlib.util.find_spec(module) is None:
        return [f"no module {module}"]
    if module.split(".")[0] not in _OWN:
        return []
    ns, error = parse_module_args(module, args)
    if ns is None:
        return [f"python -m {module} {' '.join(args)}: {error}"]
    problems = []
    preset = getattr(ns, "preset", None)
    if preset and preset not in presets():
        problems.append(f"no preset {preset!r}")
    from evals.claims import parse_study

    for study in getattr(ns, "study", None) or []:
        preset, seed = parse_study(study)  # a second base: `<preset>.seed<N>`, `default.seed<N>`
        if study != "all" and preset not in study_presets() and not (preset == "" and seed is not None):
            problems.append(f"--study {study}: not a preset that names arms ({sorted(study_presets())})")
    method = getattr(ns, "method", None)
    if isinstance(method, str) and module in ("flows.train", "flows.evaluate") and method != "base":
        try:
            params().resolve(method)
        except Exception as e:  # noqa: BLE001 - the lab's own one-line error
            problems.append(f"--method {method}: {e}")
    if module in ("flows.report", "flows.pipeline") and getattr(ns, "methods", None):
        data_dir = Path(str(getattr(ns, "data_dir", "") or ""))
        study = data_dir.parent.name if data_dir.parts[:1] == ("studies",) else None
        known = arms(study) if study in presets() else arms()
        unknown = [m for m in ns.methods if m not in known]
        if unknown:
            where = f"presets.{study}.methods" if study else "`methods:` (the default study)"
            problems.append(f"--methods {unknown}: not arms of {where}")
    return problems


def check_make(args: list[str]) -> list[str]:
    targets = [a for a in args if "=" not in a and not a.startswith("-")]
    assigns = [a for a in args if "=" in a]
    out = subprocess.run(["make", "-n", *targets, *assigns], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    if out.returncode != 0:
        return [f"make {' '.join(targets)}: {out.stderr.strip().splitlines()[-1]}"]
    problems = []
    for line in out.stdout.splitlines():  # the modules the targets run, with their ARGS
        m = re.search(r"python\S* -m (\S+)(.*)", line)
        if m and not line.lstrip().startswith("echo"):
            problems += check_python(m.group(1), shlex.split(m.group(2).split(" #")[0]))
    return problems


def check_dvc(args: list[str]) -> list[str]:
    if not args:
        return []
    problems = []
    if args[0] == "repro":
        for a in args[1:]:
            if not a.startswith("-") and a not in stages():
                problems.append(f"dvc repro {a}: no such stage in dvc.yaml")
    if args[:2] == ["exp", "run"]:
        for i, a in enumerate(args):
            if a in ("-S", "--set-param") and i + 1 < len(args):
                key = args[i + 1].split("=", 1)[0]
                if not params_key_exists(key):
                    problems.append(f"dvc exp run -S {key}: no such key in params.yaml")
    if args[:2] == ["exp", "show"] and ("--keep" in args or "--drop" in args):
        keep = [args[i + 1] for i, a in enumerate(args) if a == "--keep"]
        drop = [args[i + 1] for i, a in enumerate(args) if a == "--drop"]
        shown = exp_columns_kept(exp_show_columns(), drop, keep)
        if not [c for c in shown if c not in ("Experiment", "rev", "typ", "Created", "parent", "State", "Executor")]:
            problems.append(f"dvc exp show --drop {drop} --keep {keep}: keeps no metric or param column "
                            "(DVC names a column `<key>`, or `<file>:<key>` only when two files share the key)")
    return problems


def exp_columns_kept(columns, drop: list[str], keep: list[str]) -> list[str]:
    """DVC's rule (dvc/commands/experiments/show.py): `re.match` of the joined patterns; kept
    columns are protected from the drop.

    >>> exp_columns_kept(["Experiment", "a.x", "b.y"], [".*"], ["a\\\\."])
    ['a.x']
    """
    kept = re.compile("|".join(keep)) if keep else None
    dropped = re.compile("|".join(drop)) if drop else None
    return [c for c in columns if (kept and kept.match(c)) or not (dropped and dropped.match(c))]


def check_prefect(args: list[str]) -> list[str]:
    if args[:2] != ["deployment", "run"] or len(args) < 3:
        return []
    name, problems = args[2], []
    known = deployments()
    if name not in known:
        return [f"prefect deployment run {name!r}: no such deployment (prefect.yaml: {sorted(known)})"]
    for i, a in enumerate(args):
        if a in ("--param", "-p") and i + 1 < len(args):
            key, _, value = args[i + 1].partition("=")
            if key not in known[name]:
                problems.append(f"{name}: the flow has no parameter {key!r}")
            if key == "preset" and value not in study_presets():
                problems.append(f"{name}: preset {value!r} names no study")
    return problems


def check_command(command: str, comment: str = "") -> list[str]:
    """Every problem of one documented shell line (its comment included)."""
    problems = []
    for m in _SEEDED.finditer(comment):
        problems.append(f"{m.group(0)}: the run's outputs are under data/<kind>/<method>/seed<S>/")
    pieces = simple_commands(command) if command else []
    for n, words in enumerate(pieces):
        env = {}
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if "LAB_PRESET" in env:
            if env["LAB_PRESET"] not in presets():
                problems.append(f"LAB_PRESET={env['LAB_PRESET']}: no such preset")
            if n + 1 < len(pieces):
                problems.append("LAB_PRESET=... before the first of several commands reaches that "
                                "command only: `export LAB_PRESET=...` first")
        if not words:
            continue
        prog, args = words[0], words[1:]
        if prog == "export":
            for a in args:
                key, _, value = a.partition("=")
                if key == "LAB_PRESET" and value not in presets():
                    problems.append(f"LAB_PRESET={value}: no such preset")
        elif prog == "make":
            problems += check_make(args)
        elif Path(prog).name.startswith("python") and args[:1] == ["-m"] and len(args) >= 2:
            problems += check_python(args[1], args[2:])
        elif Path(prog).name == "dvc":
            problems += check_dvc(args)
        elif Path(prog).name == "prefect":
            problems += check_prefect(args)
        elif prog.startswith("scripts/") and not (ROOT / prog).is_file():
            problems.append(f"{prog}: no such script")
        elif prog == "cp" and args and not args[0].startswith("-") and not (ROOT / args[0]).exists():
            problems.append(f"cp {args[0]}: no such file")
    return problems


_PRESET_PROSE = re.compile(r"\bthe `?([\w-]+)`? preset\b|\bpreset `([\w-]+)`|--preset[ =]`?([\w-]+)")
# Words that read as "the <word> preset" without naming one.
_NOT_NAMES = {"same", "chosen", "new", "other", "gpu", "study", "default", "named", "first", "claim's",
              "smoke", "its", "selected", "given", "p", "x"}


# "`eval.n_test: 200` in params.yaml": a page stating the value a key has in the file now (an
# example setting, "`grpo.use_vllm: true`", says no "in params.yaml" and is not checked).
_VALUE_IN_PARAMS = re.compile(r"`((?:[a-z_]\w*\.)+[a-z_]\w*): ([^`]+)` in params\.yaml")


def params_value(key: str) -> object:
    node: object = raw_params()
    for part in key.split("."):
        node = node[part]  # type: ignore[index]
    return node


def check_prose(text: str) -> list[str]:
    """Presets named in prose exist; no paragraph selects a study preset for `dvc repro` here; a
    value stated as params.yaml's is the file's."""
    problems = []
    for m in _VALUE_IN_PARAMS.finditer(re.sub(r"\s+", " ", text)):
        key, value = m.group(1), yaml.safe_load(m.group(2))
        if not params_key_exists(key):
            problems.append(f"{m.group(0)!r}: no key {key} in params.yaml")
        elif params_value(key) != value:
            problems.append(f"{m.group(0)!r}: params.yaml has {key}: {params_value(key)!r}")
    for m in _PRESET_PROSE.finditer(text):
        name = next(g for g in m.groups() if g)
        if name.lower() not in _NOT_NAMES and not name.startswith("<") and name not in presets():
            problems.append(f"{m.group(0)!r}: no preset {name!r} in params.yaml")
    for paragraph in re.split(r"\n\s*\n", text):
        for m in re.finditer(r"preset: `?(\w+)", paragraph):
            if m.group(1) in study_presets() and "dvc repro" in paragraph and "--study" not in paragraph:
                problems.append(f"`preset: {m.group(1)}` then `dvc repro` overwrites the default base "
                                f"and the committed results: `python -m flows.pipeline --study {m.group(1)}`")
    return problems


def check_markdown(text: str) -> list[str]:
    problems = [f"{p}" for p in check_prose(text)]
    for line, command, comment in shell_commands(text):
        problems += [f"line {line}: {p}" for p in check_command(command, comment)]
    return problems


# ------------------------------------------------------------------------------ the tests

@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_documented_command_is_true(page):
    problems = check_markdown(page.read_text(encoding="utf-8"))
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_docs_hold_commands():
    """The reader finds the commands: README's two, and each page's blocks are read at all."""
    readme = [c for _, c, _ in shell_commands((ROOT / "README.md").read_text())]
    assert readme[:2] == ["make run", "make test"]
    total = sum(len(shell_commands(p.read_text())) for p in DOCS)
    assert total >= 50


OLD_WRONG = {
    # README "Collapse detection": rlme_long lives only in the weak_evaluator study (exit 2).
    "figure of an arm of another study":
        "```bash\npython -m flows.report --figure heldout:arith/pass@1 --methods rlvr rlme_long --out fig.svg\n```\n",
    # README "Experiments": DVC names the headline columns without the file prefix.
    "exp show keeping only Experiment":
        "```bash\ndvc exp show --drop '.*' --keep 'Experiment|reports/headline.json:.*'\n```\n",
    # docs/gpu.md: the preset reached `prepare` only; build_base trained the tiny model.
    "LAB_PRESET on the first of a chain":
        "```bash\nLAB_PRESET=qwen3_0p6b_1gpu python -m flows.prepare && python -m flows.synthesize\n```\n",
    # README "Running stages by hand": paths without the seed level.
    "output path without seed0/":
        "```bash\npython -m flows.evaluate --method rlvr  # data/eval/rlvr/metrics.json\n```\n",
    # docs/results.md: selecting a study preset, then `dvc repro`, overwrites the default base.
    "study preset through dvc repro":
        "The weak evaluator: `preset: weak_evaluator` in params.yaml, then `dvc repro`.\n",
    # README and docs/multiprocess.md: the preset is `ci`.
    "the micro preset": "A slow test launches `cpu_2proc.yaml` on the micro preset.\n",
    # docs/own_data.md's limits: a value said to be params.yaml's that is not (or a key that is not).
    "a stale value of params.yaml": "Scored: the first `eval.n_test: 100` in params.yaml rows.\n",
    "a value of a key params.yaml lacks": "Cut at `eval.max_new_token: 64` in params.yaml.\n",
    # And the basics: a target, a flag, a stage, a deployment, a key that do not exist.
    "no make target": "```bash\nmake smoke\n```\n",
    "no such flag": "```bash\npython -m flows.train --method rlvr --steps 3\n```\n",
    "no such stage": "```bash\ndvc repro train@nosuch-0\n```\n",
    "no such deployment": "```bash\nprefect deployment run 'pipeline/weekly'\n```\n",
    "no such params key": "```bash\ndvc exp run -S grpo.learning_rat=1e-4\n```\n",
    "make ARGS with an unknown method": "```bash\nmake study ARGS=\"--methods rlme nosuch\"\n```\n",
}


@pytest.mark.parametrize("snippet", list(OLD_WRONG.values()), ids=list(OLD_WRONG))
def test_the_old_wrong_commands_fail(snippet):
    assert check_markdown(snippet), "this wrong command passed the check"


def test_their_fixed_forms_pass():
    fixed = ("```bash\n"
             "python -m flows.report --figure heldout:arith/pass@1 --methods rlvr rlme --out fig.html\n"
             "python -m flows.report --figure heldout:arith/pass@1 --methods rlme_long "
             "--data-dir studies/weak_evaluator/data --out fig.html\n"
             "dvc exp show --md --drop '.*' "
             "--keep 'Experiment|data/eval/(base|rlvr/seed.)/headline.json:arith/pass@1'\n"
             "export LAB_PRESET=ci\n"
             "python -m flows.evaluate --method rlvr  # data/eval/rlvr/seed0/metrics.json\n"
             "python -m flows.pipeline --study weak_evaluator\n"
             "make study ARGS=\"--methods rlme rlvr\"\n"
             "```\nThe `ci` preset.\n")
    assert check_markdown(fixed) == []


def test_own_data_states_the_limits_in_force():
    """docs/own_data.md says what truncates a GSM8K or MATH file, with the values params.yaml has
    (checked against the file by check_prose): the rows scored and the token budgets."""
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "own_data.md").read_text(encoding="utf-8"))
    stated = {m.group(1) for m in _VALUE_IN_PARAMS.finditer(text)}
    assert {"eval.n_test", "eval.max_new_tokens", "grpo.max_completion_length"} <= stated, stated


def test_the_makefile_help_is_true():
    """The targets' `##` help (what a reader of the Makefile sees) names presets that exist."""
    helps = [line.split("##", 1)[1] for line in (ROOT / "Makefile").read_text().splitlines() if "##" in line]
    assert len(helps) >= 10
    assert check_prose("\n\n".join(helps)) == []


# ------------------------------------------------------------------------------ a fresh clone

def _headline_metrics() -> set[str]:
    from evals.suite import BENCHMARKS

    return {f"{task}/{BENCHMARKS[task][2]}" for task in ("arith", "facts", "pairs")}


@pytest.mark.slow
def test_the_read_only_dvc_views_of_a_fresh_clone(tmp_path):
    """The views the docs print, in a fresh clone of the committed HEAD (nothing run): `dvc
    metrics show` fits a screen (200 characters a line) with a row per evaluated run and a column
    per headline metric, and each documented `dvc exp show` filter prints, on a pipe, the
    columns it names."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=600)
    dvc = str(ROOT / ".venv" / "bin" / "dvc")
    commands = [c for p in DOCS for _, c, _ in shell_commands(p.read_text())
                if re.search(r"\bdvc (metrics show|exp show)", c)]
    assert any("exp show" in c and "--keep" in c for c in commands)
    assert any("metrics show" in c for c in commands)
    for command in sorted(set(commands)):
        words = shlex.split(command)
        args = words[words.index(next(w for w in words if Path(w).name == "dvc")) + 1:]
        out = subprocess.run([dvc, *args], cwd=clone, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"{command}: {out.stderr[-2000:]}"
        text = out.stdout
        assert "…" not in text
        header = text.splitlines()[0]
        if args[:2] == ["metrics", "show"]:
            widest = max(len(line) for line in text.splitlines())
            assert widest <= 200, f"{command}: a line of {widest} characters"
            assert all(metric in header for metric in _headline_metrics()), header
            assert "data/eval/rlvr/seed0/headline.json" in text
        if args[:2] == ["exp", "show"]:
            keep = args[args.index("--keep") + 1]
            assert len([c for c in header.split("|") if c.strip()]) > 1, f"{command}: {header}"
            for column in [c.strip() for c in header.split("|") if c.strip()]:
                assert re.fullmatch(keep, column), f"{command}: {column} is not what it keeps"


def test_the_readme_is_a_front_page():
    """README.md is the front door (10 KB at most, generated blocks included); the rest is in
    docs/, and every page it sends the reader to exists."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 10 * 1024, f"README.md is {len(text.encode())} bytes"
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).exists(), target
    for marker in ("<!-- results:begin", "<!-- results:end -->", "<!-- claims:begin", "<!-- claims:end -->"):
        assert marker in text


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_relative_link_resolves(page):
    text = page.read_text(encoding="utf-8")
    broken = [t for t in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text)
              if not (page.parent / t).exists()]
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


