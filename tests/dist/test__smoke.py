"""A two-node job simulated on one machine: two torchrun agents (2 ranks each) running gpucomm.dist.

gpucomm does no spawning here: torchrun starts the ranks, :func:`gpucomm.dist.init` reads RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, and ``python -m gpucomm.dist._smoke`` runs
the collectives and checks them.  Node 0 hosts torchrun's store on 127.0.0.1 (static rendezvous,
``--master-addr/--master-port``); gloo is pinned to ``lo``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent(node_rank: int, port: int, out: str) -> subprocess.Popen:
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GPUCOMM_DEBUG_CHECK"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
           "--node-rank", str(node_rank), "--master-addr", "127.0.0.1", "--master-port", str(port),
           "--max-restarts", "0", "--monitor-interval", "0.2",
           "-m", "gpucomm.dist._smoke", "--out", out, "--numel", "300",
           "--backend", "gloo"]  # gloo even on GPU machines: two "nodes" of 2 ranks may share one GPU
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _stop(agents: list[subprocess.Popen]) -> None:
    for a in agents:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)  # the agent's own session: it and its ranks
            a.wait()


def test_two_torchrun_agents_run_a_gpucomm_collective(tmp_path):
    port = _free_port()
    agents = [_agent(k, port, str(tmp_path)) for k in (0, 1)]
    deadline = time.monotonic() + 150
    try:
        for a in agents:
            a.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        _stop(agents)
    logs = [a.stdout.read() for a in agents]
    assert [a.returncode for a in agents] == [0, 0], "\n\n".join(logs)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert [r["rank"] for r in records] == [0, 1, 2, 3]
    assert {r["world_size"] for r in records} == {4}
    assert [r["local_rank"] for r in records] == [0, 1, 0, 1]
    assert {(r["source"], r["backend"]) for r in records} == {("torchrun", "gloo")}
    assert all(r["all_reduce_ok"] and r["all_gather_ok"] for r in records), records
    assert all(r["nested_launch_refused"] for r in records)
    assert len({r["pid"] for r in records}) == 4
    # each node's two ranks are children of that node's agent: torchrun spawned them, not gpucomm
    assert {r["ppid"] for r in records[:2]} == {agents[0].pid}
    assert {r["ppid"] for r in records[2:]} == {agents[1].pid}
    assert not [p for p in psutil.Process().children(recursive=True) if p.is_running()]
