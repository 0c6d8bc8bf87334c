"""One training across machines (issue 66, defect 8): a multi-machine accelerate config, and the
relaunch passing this machine's rank and machine 0's address from the environment.

Before: every accelerate config was single-machine and `flows.train`'s relaunch passed no machine
rank or address, so `python -m flows.train` on two machines started two separate trainings.
The slow test runs the relaunch's own accelerate flags as two "machines" on loopback (gloo, one
process each) and checks that they form one process group.
"""

from __future__ import annotations

import os
import subprocess
import tomllib

import pytest

from core.params import ROOT
from flows.train import LaunchError, accelerate_command, machine_flags, relaunch

ENV = {"NUM_MACHINES": "2", "MACHINE_RANK": "1", "MAIN_PROCESS_IP": "10.0.0.1",
       "MAIN_PROCESS_PORT": "29511"}


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_the_relaunch_passes_the_machine_rank_and_main_address():
    cmd = accelerate_command(8, None, ["--method", "rlvr"], ENV)
    launch = cmd[:cmd.index("-m", 3)]  # accelerate's own flags, before the module it runs
    assert _flag(launch, "--config_file") == "configs/accelerate/multi_node.yaml"
    assert _flag(launch, "--num_processes") == "8"  # the total over the machines
    assert _flag(launch, "--num_machines") == "2" and _flag(launch, "--machine_rank") == "1"
    assert _flag(launch, "--main_process_ip") == "10.0.0.1"
    assert _flag(launch, "--main_process_port") == "29511"
    assert cmd[-2:] == ["--num-processes", "8"]  # the launched run checks the world size
    # A config the run names is kept; the machine flags still go with it.
    named = accelerate_command(8, "configs/accelerate/deepspeed_zero2.yaml", [], ENV)
    assert _flag(named, "--config_file").endswith("deepspeed_zero2.yaml")
    assert _flag(named, "--machine_rank") == "1"


def test_one_machine_gets_no_machine_flags():
    cmd = accelerate_command(2, "configs/accelerate/cpu_2proc.yaml", ["--method", "rlvr"], {})
    assert not [c for c in cmd if c in ("--num_machines", "--machine_rank", "--main_process_ip")]


@pytest.mark.parametrize("env, says", [
    ({"NUM_MACHINES": "2", "MAIN_PROCESS_IP": "10.0.0.1"}, "MACHINE_RANK unset"),
    ({"NUM_MACHINES": "2", "MACHINE_RANK": "2", "MAIN_PROCESS_IP": "h"}, "below the number"),
    ({"NUM_MACHINES": "3", "MACHINE_RANK": "0", "MAIN_PROCESS_IP": "h"}, "a multiple of it"),
    ({"NUM_MACHINES": "two", "MACHINE_RANK": "0", "MAIN_PROCESS_IP": "h"}, "not a number"),
])
def test_a_half_given_multi_machine_launch_fails_in_one_line(env, says):
    with pytest.raises(LaunchError, match=says) as e:
        machine_flags(8, env)
    assert "\n" not in str(e.value)


def test_relaunch_exits_2_with_one_line_instead_of_a_traceback(monkeypatch, capsys):
    for key in ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NUM_MACHINES", "2")
    assert relaunch(4, None, ["--method", "rlvr"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "MACHINE_RANK" in err and "\n" not in err


def test_the_multi_node_config_leaves_rank_and_address_to_the_launch():
    from accelerate.commands.config.config_args import load_config_from_file

    cfg = load_config_from_file(str(ROOT / "configs/accelerate/multi_node.yaml"))
    assert cfg.num_machines == 2 and cfg.machine_rank == 0 and cfg.main_process_ip is None
    assert cfg.rdzv_backend == "static" and cfg.same_network and not cfg.use_cpu


def test_the_dvc_remote_plugins_are_an_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {r.split("==")[0] for r in extras["remote"]} == {"dvc-s3", "dvc-gs"}


_ALL_REDUCE = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print("RESULT", dist.get_rank(), dist.get_world_size(), os.environ["GROUP_RANK"], t.item(), flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_machines_on_loopback_form_one_process_group(tmp_path):
    """The relaunch's accelerate flags, machine 0 and machine 1 on 127.0.0.1 (multi_node.yaml
    with use_cpu: the CPU's gloo in place of NCCL), one process each, all-reduce 1 + 2."""
    import socket

    config = tmp_path / "multi_node_cpu.yaml"
    text = (ROOT / "configs/accelerate/multi_node.yaml").read_text()
    config.write_text(text.replace("use_cpu: false", "use_cpu: true"))
    script = tmp_path / "all_reduce.py"
    script.write_text(_ALL_REDUCE)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = []
    for rank in (0, 1):
        env = {"NUM_MACHINES": "2", "MACHINE_RANK": str(rank), "MAIN_PROCESS_IP": "127.0.0.1",
               "MAIN_PROCESS_PORT": port}
        cmd = accelerate_command(2, str(config), [], env)
        cmd = cmd[:cmd.index("-m", 3)] + [str(script)]  # the launch flags, a tiny script to run
        procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}))
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    results = sorted(line.split()[1:] for out in outs for line in out.splitlines()
                     if line.startswith("RESULT"))
    # Global ranks 0 and 1 of one world of 2, one on each machine; 1 + 2 summed across them.
    assert results == [["0", "2", "0", "3.0"], ["1", "2", "1", "3.0"]], outs
