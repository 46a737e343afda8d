"""gpucomm.dist's per-call caches (ops, group facts, the debug flag) keep the uncached behaviour.

All in-process, a world of one on gloo: the caches are per process, so ranks add nothing here.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as td

import gpucomm.dist as gd
from gpucomm import ProcessGroupCommunicator
from gpucomm.dist import debug
from gpucomm.dist.debug import ENV_VAR, debug_check_enabled
from gpucomm.dist.process_group import _GROUP_INFO


def test_the_env_var_is_read_on_every_call_through_the_cache(monkeypatch):
    seen = []
    for value in ("1", "0", "yes", " On ", "off", "1"):
        monkeypatch.setenv(ENV_VAR, value)
        seen.append(debug_check_enabled())
    monkeypatch.delenv(ENV_VAR)
    seen.append(debug_check_enabled())
    assert seen == [True, False, True, True, False, True, False]


def test_a_replaced_os_environ_is_still_read(monkeypatch):
    monkeypatch.setattr(os, "environ", {ENV_VAR: "true"})
    assert debug_check_enabled()
    os.environ[ENV_VAR] = "0"
    assert not debug_check_enabled()


def test_collectives_see_the_env_var_set_after_import(monkeypatch):
    calls = []
    monkeypatch.setattr(debug, "verify", lambda name, group, tensors: calls.append((name, list(tensors))))
    with gd.init("gloo"):
        t = torch.ones(2)
        monkeypatch.setenv(ENV_VAR, "0")
        gd.all_reduce(t)
        monkeypatch.setenv(ENV_VAR, "1")
        gd.all_reduce(t)
        gd.all_gather_into_tensor(torch.empty(2), t)
        gd.set_debug_check(False)
        try:
            gd.broadcast(t, 0)
        finally:
            gd.set_debug_check(None)
        gd.all_to_all_single(torch.empty(2), t, [2], [2])
    assert calls == [("all_reduce", ["tensor"]), ("all_gather_into_tensor", ["output_tensor", "input_tensor"]),
                     ("all_to_all_single", [])]


@pytest.mark.parametrize("op", ["sum", "SUM", "Sum", td.ReduceOp.SUM, "avg", "max", td.ReduceOp.MAX, "product"])
def test_every_spelling_of_an_op_gives_the_same_result_twice(op):
    with gd.init("gloo"):
        for _ in range(2):  # the second call takes the cached mapping
            t = torch.tensor([1.0, -2.0])
            gd.all_reduce(t, op)
            assert t.tolist() == [1.0, -2.0]


@pytest.mark.parametrize(("op", "error", "match"), [
    ("mean", ValueError, "unknown reduction op 'mean'"),
    (["sum"], TypeError, "expected a str such as 'sum', but got list"),
    (3, TypeError, "expected a str such as 'sum', but got int 3"),
])
def test_a_bad_op_fails_the_same_way_every_time(op, error, match):
    with gd.init("gloo"):
        for _ in range(2):  # never cached: the second call raises too
            with pytest.raises(error, match=match):
                gd.all_reduce(torch.ones(2), op)


def test_avg_on_integers_still_fails_after_a_float_avg():
    with gd.init("gloo"):
        gd.all_reduce(torch.ones(2), "avg")
        with pytest.raises(ValueError, match="a floating-point tensor for op='avg'"):
            gd.all_reduce(torch.ones(2, dtype=torch.int64), "avg")


def test_group_facts_are_forgotten_at_shutdown():
    with gd.init("gloo"):
        t = torch.full((2,), 3.0)
        work = gd.all_reduce(t, "avg", async_op=True)
        work.wait()
        assert t.tolist() == [3.0, 3.0]
        assert len(_GROUP_INFO) == 1
        gd.reduce(t, 0, "avg")
        assert t.tolist() == [3.0, 3.0]
    assert not _GROUP_INFO
    with pytest.raises(ValueError, match="not been initialized"):  # no stale answer from the cache
        gd.all_reduce(torch.ones(2), "avg")


def test_the_type_checks_still_name_the_argument():
    with gd.init("gloo"):
        with pytest.raises(TypeError, match=r"^tensor: expected a torch.Tensor, but got list"):
            gd.all_reduce([1.0])
        with pytest.raises(TypeError, match=r"^input_tensor: expected a torch.Tensor, but got int"):
            gd.all_gather_into_tensor(torch.empty(2), 5)
        with pytest.raises(TypeError, match=r"^output: expected a torch.Tensor, but got str"):
            gd.reduce_scatter_tensor("x", torch.ones(2))


def test_the_communicators_fast_checks_fall_back_to_the_full_messages():
    with gd.init("gloo"):
        comm = ProcessGroupCommunicator()
        a, b = torch.arange(4.0), torch.zeros(4)
        comm.scatter([b], [a], 0)
        assert b.tolist() == a.tolist()
        comm.gather([b.mul_(0)], [a], 0)
        assert b.tolist() == a.tolist()
        with pytest.raises(ValueError, match=r"^root: expected a participant index in \[0, 1\), but got 1"):
            comm.broadcast([a], 1)
        with pytest.raises(TypeError, match=r"^root: expected an int participant index, but got bool"):
            comm.reduce([a], True)
        with pytest.raises(ValueError, match=r"^outputs\[0\]: expected shape \[4\]"):
            comm.scatter([torch.zeros(3)], [a], 0)
        with pytest.raises(ValueError, match=r"^outputs\[0\]: expected shape \[4\]"):
            comm.all_to_all([torch.zeros(2)], [a])
        with pytest.raises(ValueError, match=r"^inputs\[0\]: expected a tensor whose dim 0 splits"):
            comm.all_to_all([torch.zeros(())], [torch.zeros(())])
        with pytest.raises(ValueError, match=r"^outputs\[0\]: expected shape \[4\]"):
            comm.send_recv([torch.zeros(2, 2)], [a])
