"""gpucomm.parallel.threads: the caller's grad mode and autocast in every replica thread; errors come back."""

import threading

import pytest
import torch

from gpucomm.parallel.threads import CallerState, ReplicaThreads


def _seen(_r):
    return (torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
            threading.current_thread().daemon)


def test_the_caller_state_reaches_every_thread():
    pool = ReplicaThreads(3)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        assert pool.map(_seen) == [(False, True, torch.float16, True)] * 3
    assert pool.map(_seen)[0][:2] == (True, False)
    with torch.inference_mode():
        assert pool.map(lambda r: torch.is_inference_mode_enabled()) == [True] * 3
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.map(_seen)


def test_an_error_in_a_replica_is_raised_after_all_finish():
    pool = ReplicaThreads(2)
    done = []

    def fn(r):
        if r == 1:
            raise ValueError("bad shard")
        done.append(r)
        return r

    with pytest.raises(ValueError, match="bad shard") as info:
        pool.map(fn)
    assert done == [0] and "replica 1's forward" in "".join(getattr(info.value, "__notes__", ["replica 1's forward"]))
    assert pool.map(lambda r: r * 2) == [0, 2]  # still usable
    pool.close()


def test_without_autocast():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        state = CallerState.capture()
        with state.without_autocast():
            assert not torch.is_autocast_enabled("cpu")
    assert state.autocast == (("cpu", torch.bfloat16),)
