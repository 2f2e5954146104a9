"""Single-node torchrun listens on loopback only (issue 19 item 17).

The launcher's command runs ``pretrain.train.torchrun_local``; a worker lists the TCP sockets its
agent (torchrun, the worker's parent) listens on, from ``/proc``: every one is 127.0.0.1.
Plain torchrun is checked too, so the test shows the difference it makes.

    .venv/bin/pytest -q tests/unit/train/test_torchrun_loopback.py     # ~15 s on 2 cores
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resources.launcher import TorchrunLauncher

pytestmark = pytest.mark.slow  # launches torchrun

REPO = Path(__file__).resolve().parents[3]
WORKER = """
import json, os, sys
import torch.distributed as dist

def listening(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.exists(f"/proc/{pid}/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                found.append(cols[1].split(":")[0])
    return found

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    json.dump(listening(os.getppid()), open(sys.argv[1], "w"))
dist.barrier()
dist.destroy_process_group()
"""
LOOPBACK_HEX = {"0100007F", "00000000000000000000FFFF0100007F"}  # 127.0.0.1 (v4, v4-mapped v6)


def agent_listen_addresses(launcher_args: list[str], tmp_path: Path) -> list[str]:
    tmp_path.mkdir(parents=True)
    script, out = tmp_path / "worker.py", tmp_path / "listening.json"
    script.write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [*launcher_args, str(script), str(out)], check=True, env=env, timeout=120,
        capture_output=True,
    )  # fmt: skip
    return json.loads(out.read_text())


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_the_launchers_torchrun_listens_on_loopback_only(tmp_path: Path) -> None:
    cmd = TorchrunLauncher(nproc_per_node=2).command("run.json", event_sink=None)
    assert cmd[1:3] == ["-m", "pretrain.train.torchrun_local"] and "--standalone" in cmd
    launcher_args = cmd[: cmd.index("-m", 3)]  # everything before "-m pretrain.train"
    ours = agent_listen_addresses(launcher_args, tmp_path / "ours")
    assert len(ours) == 2 and set(ours) <= LOOPBACK_HEX, ours  # rendezvous + master store
    plain = agent_listen_addresses(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"],
        tmp_path / "plain",
    )
    assert plain and not set(plain) <= LOOPBACK_HEX  # what the wrapper fixes: `*:port`
