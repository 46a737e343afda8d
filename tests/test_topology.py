"""``gpucomm topo``: NVML path (with a fake NVML), nvidia-smi parsing, and the no-GPU machine."""

from __future__ import annotations

import json
import sys
import types

import pytest

from gpucomm import topology
from gpucomm.cli import main

SMI_H200 = """\
\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tNV18\tPXB\t0-47,96-143\t0\t\tN/A
GPU1\tNV18\t X \tNV18\tSYS\t0-47,96-143\t0\t\tN/A
GPU2\tNV18\tNV18\t X \tSYS\t48-95,144-191\t1\t\tN/A
NIC0\tPXB\tSYS\tSYS\t X \t\t\t\t

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
"""

SMI_PCIE = """\
        GPU0    GPU1    CPU Affinity    NUMA Affinity
GPU0     X      PHB     0-7             N/A
GPU1    PHB      X      0-7             N/A
"""


def test_parse_nvidia_smi_nvlink_matrix():
    topo = topology.parse_nvidia_smi_topo(SMI_H200)
    assert topo.source == "nvidia-smi"
    assert [g.index for g in topo.gpus] == [0, 1, 2]
    assert topo.links[0] == ["X", "NV18", "NV18"]  # the NIC column is not a GPU
    assert topo.nvlinks[2] == [18, 18, 0]
    assert topo.gpus[2].cpu_affinity == "48-95,144-191" and topo.gpus[2].numa_node == 1


def test_parse_nvidia_smi_pcie_only():
    topo = topology.parse_nvidia_smi_topo(SMI_PCIE)
    assert topo.links == [["X", "PHB"], ["PHB", "X"]]
    assert topo.nvlinks == [[0, 0], [0, 0]] and topo.gpus[0].numa_node is None


def test_parse_nvidia_smi_rejects_garbage():
    with pytest.raises(ValueError, match="GPU0"):
        topology.parse_nvidia_smi_topo("No devices were found\n")


def test_cpu_list_from_mask():
    assert topology._cpu_list([0b1111_0000_1011]) == "0-1,3,8-11"
    assert topology._cpu_list([0, 1]) == "64"


class _NVMLError(Exception):
    pass


def _fake_nvml(switched: bool, fail_init: bool = False):
    """Three GPUs: 0-1 joined by 4 direct NVLinks, 2 PCIe-only (or, switched: 18 links each to NVSwitches)."""
    buses = ["00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0"]
    nv = types.SimpleNamespace(NVMLError=_NVMLError)

    def init():
        if fail_init:
            raise _NVMLError("NVML Shared Library Not Found")

    def remote(h, link):
        if switched:
            return types.SimpleNamespace(busId=b"00000000:A0:00.0")  # an NVSwitch
        return types.SimpleNamespace(busId=buses[1 - h].encode())

    def state(h, link):
        if switched:
            if link >= 18:
                raise _NVMLError("no such link")
            return 1
        if h == 2 or link >= 4:
            raise _NVMLError("not supported")
        return 1

    nv.nvmlInit, nv.nvmlShutdown = init, lambda: None
    nv.nvmlDeviceGetCount = lambda: 3
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=buses[h])
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=141 * 2**30)
    nv.nvmlDeviceGetCpuAffinity = lambda h, words: [0xFF if h < 2 else 0xFF00]
    nv.nvmlDeviceGetNvLinkState = state
    nv.nvmlDeviceGetNvLinkRemotePciInfo = remote
    nv.nvmlDeviceGetTopologyCommonAncestor = lambda a, b: 50 if 2 in (a, b) else 10
    return nv


def test_nvml_direct_links_and_pcie_paths(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(switched=False))
    topo = topology.collect()
    assert topo.source == "nvml" and len(topo.gpus) == 3
    assert topo.links == [["X", "NV4", "SYS"], ["NV4", "X", "SYS"], ["SYS", "SYS", "X"]]
    assert topo.gpus[2].cpu_affinity == "8-15" and topo.gpus[0].memory_bytes == 141 * 2**30
    json.dumps(topo.to_dict())


def test_nvml_nvswitch_fabric(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(switched=True))
    topo = topology.collect()
    assert all(topo.links[i][j] == ("X" if i == j else "NV18") for i in range(3) for j in range(3))


def test_nvml_init_failure_falls_back_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(switched=False, fail_init=True))
    monkeypatch.setattr(topology.shutil, "which", lambda name: None)
    topo = topology.collect()
    assert topo.source == "none" and topo.gpus == []
    assert any("could not initialise" in n for n in topo.notes)
    assert any("nvidia-smi" in n for n in topo.notes)


def test_nvidia_smi_fallback_is_used(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(switched=False, fail_init=True))
    monkeypatch.setattr(topology.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(topology.subprocess, "run",
                        lambda *a, **k: types.SimpleNamespace(returncode=0, stdout=SMI_H200, stderr=""))
    topo = topology.collect()
    assert topo.source == "nvidia-smi" and topo.nvlinks[0][1] == 18


def test_topo_cli_without_gpus(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(switched=False, fail_init=True))
    monkeypatch.setattr(topology.shutil, "which", lambda name: None)
    assert main(["topo"]) == 0
    assert "no CUDA devices" in capsys.readouterr().out
    assert main(["topo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"] == [] and data["cpu_count"] >= 1 and data["source"] == "none"


def test_topo_cli_table_with_gpus(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(switched=False))
    assert main(["topo"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "NV4" in out and "SYS" in out


def test_real_machine_collect_never_raises():
    data = topology.collect().to_dict()
    json.dumps(data)
    assert data["source"] in ("nvml", "nvidia-smi", "none")
