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


def _fail(fn, *args, timeout: float = TIMEOUT, **kwargs) -> tuple[LaunchError, float]:
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(fn, 2, *args, timeout=timeout, backend="gloo", **kwargs)  # the launcher is under test, not NCCL
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


# ----- probes: who is named, what is left behind, what is refused up front --------------------------
def _rank_one_skips_the_collective() -> float:
    if gd.get_rank() == 1:
        return -1.0  # returns without joining the all_reduce rank 0 is blocked in
    return _collective()


def test_a_rank_that_returned_without_joining_a_collective_is_the_one_named():
    timeout = 4.0
    err, elapsed = _fail(_rank_one_skips_the_collective, timeout=timeout)
    assert (err.rank, err.kind) == (1, "returned"), str(err)
    assert "rank(s) 0 waited for it in a collective" in err.summary
    others = {f.rank: f for f in err.failures[1:]}
    assert others[0].kind == "timeout" and others[0].secondary
    assert elapsed < timeout + 15


def _spawn_grandchild_then_hang(pid_dir: str) -> None:
    import subprocess
    import sys

    if gd.get_rank() == 1:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(os.path.join(pid_dir, "grandchild.pid"), "w") as f:
            f.write(str(child.pid))
        time.sleep(3600)
    _collective()


def test_a_grandchild_of_a_hung_rank_does_not_outlive_the_launch(tmp_path):
    err, _ = _fail(_spawn_grandchild_then_hang, str(tmp_path), timeout=4.0)
    assert (err.rank, err.kind) == (1, "timeout")
    pid = int((tmp_path / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"grandchild {pid} of rank 1 outlived the launch"
        time.sleep(0.1)


def _record_pid_and_hang(pid_dir: str) -> None:
    with open(os.path.join(pid_dir, f"rank{gd.get_rank()}.pid"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(3600)


_SIGTERM_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import importlib.util
spec = importlib.util.spec_from_file_location("probe_launch", {test_file!r})
mod = importlib.util.module_from_spec(spec)
sys.modules["probe_launch"] = mod
spec.loader.exec_module(mod)
from gpucomm.dist import launch
launch(mod._record_pid_and_hang, 2, {pid_dir!r}, backend="gloo", timeout=300)
"""


def test_a_sigtermed_launcher_removes_its_directory_and_stops_its_ranks(tmp_path):
    import subprocess
    import sys

    tmp, pids = tmp_path / "tmp", tmp_path / "pids"
    tmp.mkdir()
    pids.mkdir()
    script = _SIGTERM_SCRIPT.format(tests=os.path.dirname(__file__), test_file=__file__, pid_dir=str(pids))
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(tmp)})
    try:
        deadline = time.monotonic() + 90
        while len(list(pids.glob("rank*.pid"))) < 2:
            assert proc.poll() is None, f"the launcher ended early with {proc.returncode}"
            assert time.monotonic() < deadline, "the ranks never started"
            time.sleep(0.2)
        assert [p.name for p in tmp.iterdir() if p.name.startswith("gpucomm-launch-")]  # it exists now
        time.sleep(0.5)  # both ranks are in fn
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM  # it still dies of the SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("gpucomm-launch-")]
    for f in pids.glob("rank*.pid"):
        pid = int(f.read_text())
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, f.name


def test_an_unknown_backend_is_refused_before_anything_starts():
    with pytest.raises(ValueError) as info:
        launch(_collective, 2, backend="glooo")
    msg = str(info.value)
    assert msg.startswith("backend: expected one of ") and "'gloo'" in msg and "'glooo'" in msg
    assert "\n" not in msg
    _no_children_left()


def test_more_ranks_than_the_machine_can_hold_are_refused_unless_asked_for():
    too_many = 4 * (os.cpu_count() or 1) + 1
    with pytest.raises(ValueError) as info:
        launch(_collective, too_many, backend="gloo")
    assert str(info.value).startswith("nprocs: expected at most ")
    assert "allow_oversubscribe=True" in str(info.value)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="nprocs: expected an int >= 1"):
            launch(_collective, bad)
    with pytest.raises(TypeError, match="allow_oversubscribe: expected a bool"):
        launch(_collective, 2, allow_oversubscribe="yes")
    _no_children_left()
    assert gd.check_nprocs(too_many, "gloo", allow_oversubscribe=True) == too_many
    with pytest.raises(ValueError, match=r"^--nproc: expected at most"):
        gd.check_nprocs(too_many, "gloo", arg="--nproc")
    with pytest.raises(TypeError, match=r"^--nproc: expected an int"):
        gd.check_nprocs("4", "gloo", arg="--nproc")
