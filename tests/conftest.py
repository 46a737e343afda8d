"""Test hygiene, applied to every test automatically.

A test fails if it leaks environment variables, leaves a default process group initialised, or
leaves non-daemon threads or child processes running: a leak in one test becomes a mystery failure
in another, so it is caught where it happens.
"""

from __future__ import annotations

import os
import threading

import psutil
import pytest
import torch.distributed as dist

# Variables that torch, NCCL or the tests themselves may legitimately set once per process.
_ENV_ALLOWED = {"PYTEST_CURRENT_TEST", "KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK", "OMP_NUM_THREADS",
                "CUDA_MODULE_LOADING", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"}


@pytest.fixture(autouse=True)
def _no_leaked_env():
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)} - _ENV_ALLOWED
    os.environ.clear()
    os.environ.update(before)
    assert not changed, f"test leaked environment variables: {sorted(changed)}"


@pytest.fixture(autouse=True)
def _no_leaked_process_group():
    yield
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        pytest.fail("test left the default process group initialised; call gpucomm.dist.shutdown()")


@pytest.fixture(autouse=True)
def _no_leaked_threads_or_children():
    threads_before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate()
              if t not in threads_before and t.is_alive() and not t.daemon]
    children = [p for p in psutil.Process().children(recursive=True) if p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE]
    for p in children:
        p.kill()
    assert not leaked, f"test leaked threads: {[t.name for t in leaked]}"
    assert not children, f"test left child processes running: {[(p.pid, p.name()) for p in children]}"


def _load_torch_loops():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("torch_loops", Path(__file__).with_name("_torch_loops.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def torch_loops():
    """torch.cuda.comm's C++ loops as CPU stand-ins that check as the real ones do (tests/_torch_loops.py);
    yields the list of loops that ran."""
    with _load_torch_loops().on_cpu() as calls:
        yield calls
