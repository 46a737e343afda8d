"""gpucomm.dist.process_group: reading launcher environments, init and shutdown in this process."""

from __future__ import annotations

import datetime as dt
import glob
import os
import tempfile

import pytest
import torch

import gpucomm.dist as gd
from gpucomm.dist.process_group import DistEnv, backend_for, default_backend, read_env, to_timedelta


def test_read_env_from_torchrun():
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
           "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"}
    assert read_env(env) == DistEnv(source="torchrun", rank=5, world_size=8, local_rank=1, local_world_size=4,
                                    master_addr="10.0.0.1", master_port=29400)


def test_read_env_from_slurm():
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NNODES": "2",
           "SLURM_NTASKS_PER_NODE": "2(x2)", "MASTER_ADDR": "node01"}
    assert read_env(env) == DistEnv(source="slurm", rank=3, world_size=4, local_rank=1, local_world_size=2,
                                    master_addr="node01", master_port=29500)


def test_read_env_without_a_launcher_is_a_world_of_one():
    assert read_env({}) == DistEnv(source="none", rank=0, world_size=1, local_rank=0, local_world_size=1)


@pytest.mark.parametrize(("env", "match"), [
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK: expected an integer, but got 'x'"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, r"RANK must be in \[0, 2\), but got 2"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "two"}, "SLURM_NTASKS: expected an integer"),
])
def test_read_env_rejects_bad_values(env, match):
    with pytest.raises(ValueError, match=match):
        read_env(env)


def test_timeouts_accept_seconds_and_timedeltas():
    assert to_timedelta(1.5) == dt.timedelta(seconds=1.5)
    assert to_timedelta(dt.timedelta(minutes=2)) == dt.timedelta(seconds=120)
    with pytest.raises(ValueError, match="positive"):
        to_timedelta(-1)
    with pytest.raises(TypeError, match="seconds"):
        to_timedelta("10")


def test_default_backend_follows_the_devices():
    assert default_backend() == ("nccl" if torch.cuda.is_available() else "gloo")


def test_the_backend_per_device_type_is_chosen_in_one_place():
    assert [backend_for(t) for t in ("cuda", "cpu", "mps")] == ["nccl", "gloo", "gloo"]


def _store_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "gpucomm-pg-*")))


def test_init_without_a_launcher_is_a_world_of_one_and_shutdown_cleans_up():
    before = _store_dirs()
    with gd.init("gloo", timeout=30) as pg:
        assert (pg.rank, pg.world_size, pg.source, pg.device) == (0, 1, "none", torch.device("cpu"))
        assert gd.is_initialized() and gd.current() is pg
        (new,) = _store_dirs() - before
        assert os.stat(new).st_mode & 0o777 == 0o700
        with pytest.raises(RuntimeError, match="already initialised"):
            gd.init("gloo")
        t = torch.ones(3)
        gd.all_reduce(t, "avg")
        assert t.tolist() == [1.0, 1.0, 1.0]
    assert not gd.is_initialized()
    assert _store_dirs() == before
    gd.shutdown()  # twice is fine


def test_the_context_manager_shuts_down_when_its_body_raises():
    with pytest.raises(KeyError), gd.init("gloo"):
        raise KeyError("boom")
    assert not gd.is_initialized()


def test_slurm_without_master_addr_says_how_to_set_it(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    with pytest.raises(ValueError, match="scontrol show hostnames"):
        gd.init("gloo")
    assert not gd.is_initialized()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_nccl_without_gpus_says_so():
    with pytest.raises(ValueError, match="'nccl' needs CUDA devices"):
        gd.init("nccl")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("launcher", ["slurm", "torchrun"])
def test_init_reads_a_launchers_world_of_one(monkeypatch, launcher):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    if launcher == "slurm":
        monkeypatch.setenv("SLURM_PROCID", "0")
        monkeypatch.setenv("SLURM_NTASKS", "1")
    else:
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", "1")
    with gd.init("gloo", timeout=30) as pg:
        assert (pg.source, pg.rank, pg.world_size) == (launcher, 0, 1)
        t = torch.ones(2)
        gd.all_reduce(t)
        assert t.tolist() == [1.0, 1.0]
    assert not gd.is_initialized()


def test_an_unknown_backend_lists_the_valid_ones():
    from gpucomm.dist.process_group import known_backends

    assert "gloo" in known_backends() and "fake" not in known_backends()
    with pytest.raises(ValueError) as info:
        gd.init("nosuch")
    msg = str(info.value)
    assert msg.startswith("backend: expected one of ") and "'gloo'" in msg and "'nosuch'" in msg
    with pytest.raises(TypeError, match="^backend: expected a str"):
        gd.init(3)
