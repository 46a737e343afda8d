"""The env block: what it records, and that it never loses a run over topology."""

from __future__ import annotations

import subprocess
import sys

from gpucomm import env as E
from gpucomm.records import EnvRecord


def test_env_block_fields(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    record = E.collect_env("cpu", extra={"iters": 3}, command=["gpucomm", "bench"])
    assert isinstance(record, EnvRecord)
    assert record.device_type == "cpu" and record.command == ["gpucomm", "bench"]
    assert record.extra == {"iters": 3}
    assert record.env_vars["NCCL_NVLS_ENABLE"] == "0" and record.env_vars["GLOO_SOCKET_IFNAME"] == "lo"
    assert "UNRELATED_SECRET" not in record.env_vars
    assert {"gpucomm", "torch", "python"} <= set(record.versions)
    assert record.host["cpu_count"] and record.created.endswith("+00:00")


def test_topology_failure_is_recorded_not_raised(monkeypatch):
    from gpucomm import topology

    def boom():
        raise RuntimeError("driver on fire")

    monkeypatch.setattr(topology, "collect", boom)
    assert E.collect_env("cpu").topology == {"error": "RuntimeError: driver on fire"}


def test_importing_env_does_not_import_torch():
    code = "import sys, gpucomm.env; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
