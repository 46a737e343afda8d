"""gpucomm.dist.launch: results in rank order, the workers' environment, and every way a rank can fail.

Each failure test makes rank 1 fail while rank 0 is blocked in a collective, then checks that the
launch ends within its timeout, names rank 1 and how it failed, carries its traceback, and leaves
no process behind.
"""

from __future__ import annotations

import os
import pickle
import signal
import time

import psutil
import pytest
import torch

import gpucomm.dist as gd
from gpucomm.dist import LaunchError, launch
from gpucomm.testing import requires_gpus

TIMEOUT = 20.0  # generous for a loaded 2-core machine; the failures below are detected long before


# ----- worker bodies (module level: the workers import them) ---------------------------------------
def _collective() -> float:
    t = torch.ones(8)
    gd.all_reduce(t)
    return float(t[0])


def _raises() -> float:
    if gd.get_rank() == 1:
        raise ValueError("rank one's input is bad")
    return _collective()


def _exits_hard() -> float:
    if gd.get_rank() == 1:
        os._exit(7)
    return _collective()


def _kills_itself() -> float:
    if gd.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return _collective()


def _sleeps_in_rank_one() -> float:
    if gd.get_rank() == 1:
        time.sleep(3600)
    return _collective()


def _mismatched_shapes() -> float:
    t = torch.ones(4 + gd.get_rank())
    gd.all_reduce(t)
    return float(t[0])


def _returns_unpicklable():
    return (lambda: None) if gd.get_rank() == 1 else 0


def _no_children_left() -> None:
    leftover = [p for p in psutil.Process().children(recursive=True) if p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE]
    assert not leftover, f"processes left behind: {leftover}"


def _fail(fn, *, timeout: float = TIMEOUT, **kwargs) -> tuple[LaunchError, float]:
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(fn, 2, timeout=timeout, backend="gloo", **kwargs)  # the launcher is under test, not NCCL
    elapsed = time.monotonic() - start
    _no_children_left()
    return info.value, elapsed


# ----- failures ---------------------------------------------------------------------------------------
def test_a_raising_rank_is_named_with_its_traceback():
    err, elapsed = _fail(_raises)
    assert (err.rank, err.kind) == (1, "exception")
    assert err.summary == "ValueError: rank one's input is bad"
    assert "in _raises" in err.failures[0].traceback and "rank 1 of 2 failed" in str(err)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)  # survives pytest-xdist and friends
    assert elapsed < TIMEOUT


def test_a_hard_exit_is_named_with_its_exit_code():
    err, elapsed = _fail(_exits_hard)
    assert (err.rank, err.kind, err.failures[0].exitcode) == (1, "exit", 7)
    assert "exited with code 7" in str(err)
    assert elapsed < TIMEOUT


def test_a_signal_is_named():
    err, elapsed = _fail(_kills_itself)
    assert (err.rank, err.kind) == (1, "signal")
    assert "killed by SIGKILL" in err.summary
    assert elapsed < TIMEOUT


def test_a_hang_is_stopped_at_the_timeout_with_the_stack_it_hung_in():
    timeout = 4.0
    err, elapsed = _fail(_sleeps_in_rank_one, timeout=timeout)
    assert (err.rank, err.kind) == (1, "timeout")
    assert "_sleeps_in_rank_one" in err.failures[0].traceback  # the faulthandler dump of rank 1
    others = {f.rank: f for f in err.failures[1:]}
    assert others[0].kind == "timeout" and others[0].secondary  # rank 0 was waiting in all_reduce
    assert timeout <= elapsed < timeout + 15  # + start-up (not counted) and the stop


def test_mismatched_shapes_fail_on_every_rank_with_the_debug_check():
    err, elapsed = _fail(_mismatched_shapes, debug_check=True)
    assert err.kind == "exception" and err.summary.startswith("CollectiveMismatchError")
    text = err.failures[0].traceback
    assert "rank 0: tensor=float32[4]" in text
    assert "rank 1: tensor=float32[5]   <-- differs from rank 0" in text
    assert {f.rank for f in err.failures} == {0, 1}
    assert elapsed < TIMEOUT


def test_an_unpicklable_result_is_a_failure_of_that_rank():
    err, _ = _fail(_returns_unpicklable)
    assert err.rank == 1 and err.kind == "exception"


# ----- arguments ---------------------------------------------------------------------------------------
def test_launch_rejects_what_workers_could_not_import():
    with pytest.raises(TypeError, match="module-level function"):
        launch(lambda: 0, 2)

    def local():
        return 0

    with pytest.raises(TypeError, match="module-level function"):
        launch(local, 2)
    with pytest.raises(ValueError, match="nprocs: expected an int >= 1"):
        launch(_collective, 0)
    with pytest.raises(ValueError, match="timeout: expected a positive"):
        launch(_collective, 2, timeout=0)
    _no_children_left()


def test_launch_refuses_to_nest_inside_a_multi_process_job(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(RuntimeError, match="already rank 1 of a 4-process torchrun job"):
        launch(_collective, 2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_launch_nccl_without_gpus_says_so():
    with pytest.raises(ValueError, match="'nccl' needs"):
        launch(_collective, 2, backend="nccl")


@requires_gpus(2)
def test_a_raising_rank_is_named_under_nccl_too():
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(_raises, 2, backend="nccl", timeout=60)
    assert (info.value.rank, info.value.kind) == (1, "exception")
    assert time.monotonic() - start < 60
    _no_children_left()


@requires_gpus(1)
def test_nccl_launch_sets_each_rank_on_its_own_gpu():
    assert launch(_device_of_rank, 1, backend="nccl", timeout=120) == ["cuda:0"]


def _device_of_rank() -> str:
    t = torch.ones(4, device=gd.device())
    gd.all_reduce(t)
    assert torch.cuda.current_device() == gd.get_rank()
    return str(t.device)
