"""``gpucomm topo``: GPUs, the links between them, and their CPU/NUMA affinity.

Usage::

    gpucomm topo            # tables: devices, then the link matrix
    gpucomm topo --json     # the same as JSON (what every result's env block carries)

Sources, in order:

1. **NVML** (``nvidia-ml-py``/``pynvml``): names, PCI bus ids, memory, NVLink state per link, the
   common PCIe ancestor of each pair, CPU affinity.  A pair's label is ``NV<k>`` when ``k`` active
   NVLinks join them — directly, or through NVSwitches, where every GPU's links go to the switch
   fabric and a pair gets the smaller of the two GPUs' switch-link counts (what ``nvidia-smi topo -m``
   prints on HGX machines) — and otherwise the PCIe path as ``nvidia-smi`` names it: ``PIX`` (one
   PCIe switch), ``PXB`` (several switches), ``PHB`` (a host bridge), ``NODE`` (host bridges within
   a NUMA node), ``SYS`` (across NUMA nodes, e.g. over QPI/UPI).
2. **``nvidia-smi topo -m``**, parsed, when NVML cannot be loaded or initialised.
3. **Neither**: no CUDA devices; the CPU and NUMA layout is still reported.

NVML numbers GPUs physically; ``CUDA_VISIBLE_DEVICES`` (recorded alongside) may renumber them for
torch.  Collecting never raises for a missing driver: what could not be read is said in ``notes``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["GpuInfo", "Topology", "add_parser", "collect", "parse_nvidia_smi_topo", "run"]

# NVML_TOPOLOGY_* levels (nvml.h) → nvidia-smi's PCIe path names.
_PCIE_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS in recent drivers (H100/H200: 18 links)
_SMI_TIMEOUT_S = 10


@dataclass(slots=True, kw_only=True)
class GpuInfo:
    """One GPU as the driver sees it."""

    index: int
    """NVML (physical) index."""
    name: str
    pci_bus_id: str = ""
    memory_bytes: int | None = None
    cpu_affinity: str = ""
    """CPUs close to the GPU, as a list like ``0-47,96-143``."""
    numa_node: int | None = None
    """The GPU's NUMA node (None when unknown or not a NUMA machine)."""


@dataclass(slots=True, kw_only=True)
class Topology:
    """What :func:`collect` found: devices, a pairwise link matrix, CPUs and NUMA nodes."""

    source: str
    """"nvml", "nvidia-smi" or "none"."""
    gpus: list[GpuInfo] = field(default_factory=list)
    links: list[list[str]] = field(default_factory=list)
    """``links[i][j]``: "X" on the diagonal, "NV<k>", or a PCIe path name (see the module docstring)."""
    nvlinks: list[list[int]] = field(default_factory=list)
    """``nvlinks[i][j]``: active NVLinks between GPUs i and j (0 for PCIe-only pairs)."""
    cpu_count: int | None = None
    numa_nodes: dict[str, str] = field(default_factory=dict)
    """NUMA node → its CPU list, from ``/sys/devices/system/node``."""
    cuda_visible_devices: str | None = None
    notes: list[str] = field(default_factory=list)
    """What could not be read, and why."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (the env block's ``topology``)."""
        return asdict(self)


# ----- CPU and NUMA ------------------------------------------------------------------------------------
def _numa_nodes(root: Path = Path("/sys/devices/system/node")) -> dict[str, str]:
    nodes = {}
    for d in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            nodes[d.name[4:]] = (d / "cpulist").read_text().strip()
        except OSError:
            continue
    return nodes


def _cpu_list(mask_words: list[int], word_bits: int = 64) -> str:
    """A CPU bitmask (NVML's array of words, lowest first) as ``0-3,8``."""
    cpus = [w * word_bits + b for w, word in enumerate(mask_words) for b in range(word_bits) if word >> b & 1]
    ranges: list[str] = []
    start = prev = None
    for c in cpus + [None]:
        if start is not None and (c is None or c != prev + 1):
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if c is not None and start is None:
            start = c
        prev = c
    return ",".join(ranges)


def _sysfs_numa(bus_id: str) -> int | None:
    """The NUMA node of a PCI device, from sysfs (NVML's 8-digit domain shortened to sysfs' 4)."""
    match = re.match(r"^([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.(\d)$", bus_id.strip())
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    path = Path(f"/sys/bus/pci/devices/{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.{fn}/numa_node")
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


# ----- NVML ----------------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_gpu(nvml, index: int, handle) -> GpuInfo:
    bus_id = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
    try:
        memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
    except nvml.NVMLError:
        memory = None
    try:
        words = (os.cpu_count() or 64) // 64 + 1
        affinity = _cpu_list(list(nvml.nvmlDeviceGetCpuAffinity(handle, words)))
    except (nvml.NVMLError, AttributeError):
        affinity = ""
    return GpuInfo(index=index, name=_text(nvml.nvmlDeviceGetName(handle)), pci_bus_id=bus_id,
                   memory_bytes=memory, cpu_affinity=affinity, numa_node=_sysfs_numa(bus_id))


def _norm_bus(bus_id: str) -> str:
    """Bus ids compared without the domain's leading zeros and case (``00000000:1B:00.0`` = ``0000:1b:00.0``)."""
    head, _, rest = bus_id.strip().lower().rpartition(":")
    domain, _, bus = head.partition(":") if head.count(":") else ("0", "", head)
    return f"{int(domain or '0', 16)}:{bus}:{rest}"


def _nvml_links(nvml, handles: list, gpus: list[GpuInfo]) -> tuple[list[list[int]], list[int]]:
    """(direct NVLinks per pair, links to the switch fabric per GPU)."""
    by_bus = {_norm_bus(g.pci_bus_id): g.index for g in gpus}
    n = len(handles)
    direct = [[0] * n for _ in range(n)]
    switch = [0] * n
    for i, h in enumerate(handles):
        for link in range(_NVLINK_MAX_LINKS):
            try:
                if not nvml.nvmlDeviceGetNvLinkState(h, link):
                    continue
                remote = _norm_bus(_text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
            except nvml.NVMLError:
                continue  # the link does not exist on this GPU, or NVLink is not supported
            peer = by_bus.get(remote)
            if peer is not None and peer != i:
                direct[i][peer] += 1
            else:
                switch[i] += 1
    return direct, switch


def _pcie_level(nvml, a, b) -> str:
    try:
        return _PCIE_LEVELS.get(int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b)), "?")
    except nvml.NVMLError:
        return "?"


def _from_nvml(nvml) -> Topology:
    count = nvml.nvmlDeviceGetCount()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    gpus = [_nvml_gpu(nvml, i, h) for i, h in enumerate(handles)]
    direct, switch = _nvml_links(nvml, handles, gpus)
    links = [["X"] * count for _ in range(count)]
    nvlinks = [[0] * count for _ in range(count)]
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            k = direct[i][j] or min(switch[i], switch[j])
            nvlinks[i][j] = k
            links[i][j] = f"NV{k}" if k else _pcie_level(nvml, handles[i], handles[j])
    return Topology(source="nvml", gpus=gpus, links=links, nvlinks=nvlinks)


def _try_nvml(notes: list[str]) -> Topology | None:
    try:
        import pynvml as nvml
    except ImportError as exc:
        notes.append(f"NVML: nvidia-ml-py is not installed ({exc})")
        return None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
        notes.append(f"NVML: could not initialise ({type(exc).__name__}: {exc})")
        return None
    try:
        return _from_nvml(nvml)
    except Exception as exc:
        notes.append(f"NVML: failed while reading devices ({type(exc).__name__}: {exc})")
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


# ----- nvidia-smi topo -m ------------------------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _is_header(line: str) -> bool:
    """The matrix header: only column names (GPU<i>, NIC<i>) before "CPU Affinity", GPU0 among them."""
    names = line.split("CPU Affinity")[0].split()
    return "GPU0" in names and all(re.fullmatch(r"(?:GPU|NIC)\d+|mlx\S+", t) for t in names)


def parse_nvidia_smi_topo(text: str) -> Topology:
    """Parse ``nvidia-smi topo -m`` output: GPU×GPU labels, CPU and NUMA affinity per GPU.

    NIC columns and the legend are ignored.  Raises ``ValueError`` when no GPU matrix is found.
    """
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header = next((line for line in lines if _is_header(line)), None)
    if header is None:
        raise ValueError("nvidia-smi topo -m: no GPU matrix header (a line naming GPU0) found")
    columns = header.split("CPU Affinity")[0].split()
    gpu_cols = [i for i, c in enumerate(columns) if re.fullmatch(r"GPU\d+", c)]
    gpus, links, nvlinks = [], [], []
    for line in lines:
        tokens = line.split()
        if not tokens or not re.fullmatch(r"GPU\d+", tokens[0]) or _is_header(line):
            continue
        cells = tokens[1:1 + len(columns)]
        rest = tokens[1 + len(columns):]
        if len(cells) < len(columns):
            continue
        row = [cells[i] for i in gpu_cols]
        links.append(row)
        nvlinks.append([int(c[2:]) if re.fullmatch(r"NV\d+", c) else 0 for c in row])
        numa = rest[1] if len(rest) > 1 and rest[1].isdigit() else None
        gpus.append(GpuInfo(index=int(tokens[0][3:]), name="", cpu_affinity=rest[0] if rest else "",
                            numa_node=int(numa) if numa is not None else None))
    if not gpus:
        raise ValueError("nvidia-smi topo -m: the header names GPUs but no GPU rows follow")
    return Topology(source="nvidia-smi", gpus=gpus, links=links, nvlinks=nvlinks)


def _try_nvidia_smi(notes: list[str]) -> Topology | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        notes.append("nvidia-smi: not found on PATH")
        return None
    try:
        done = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=_SMI_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        notes.append(f"nvidia-smi topo -m: did not run ({type(exc).__name__}: {exc})")
        return None
    if done.returncode != 0:
        notes.append(f"nvidia-smi topo -m: exit status {done.returncode} ({done.stderr.strip()[:200]})")
        return None
    try:
        return parse_nvidia_smi_topo(done.stdout)
    except ValueError as exc:
        notes.append(str(exc))
        return None


# ----- collect ---------------------------------------------------------------------------------------------
def collect() -> Topology:
    """Devices, links, CPU and NUMA layout from NVML, else ``nvidia-smi topo -m``, else none; never raises."""
    notes: list[str] = []
    topo = _try_nvml(notes)
    if topo is None or not topo.gpus:
        if topo is not None:
            notes.append("NVML: initialised, but reports no GPUs")
        topo = _try_nvidia_smi(notes) or Topology(source="none")
    topo.notes = notes + topo.notes
    topo.cpu_count = os.cpu_count()
    topo.numa_nodes = _numa_nodes()
    topo.cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    return topo


# ----- the subcommand ----------------------------------------------------------------------------------------
def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``gpucomm topo`` and return its parser."""
    p = subparsers.add_parser("topo", help="devices, links (NVLink/PCIe) and CPU/NUMA affinity",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p


def _memory(nbytes: int | None) -> str:
    return "—" if nbytes is None else f"{nbytes / 2**30:.1f} GiB"


def render(topo: Topology, console=None) -> None:
    """Print the device table and the link matrix (or "no CUDA devices") with rich."""
    from rich.table import Table

    from gpucomm._console import make_console

    console = console or make_console()
    if not topo.gpus:
        console.print("no CUDA devices found")
    else:
        devices = Table(title=f"GPUs (from {topo.source})", header_style="bold")
        for col in ("GPU", "name", "PCI bus id", "memory", "NUMA node", "CPU affinity"):
            devices.add_column(col)
        for g in topo.gpus:
            devices.add_row(str(g.index), g.name or "—", g.pci_bus_id or "—", _memory(g.memory_bytes),
                            "—" if g.numa_node is None else str(g.numa_node), g.cpu_affinity or "—")
        console.print(devices)
        matrix = Table(title="links (NV<k> = k NVLinks; PIX/PXB/PHB/NODE/SYS = PCIe path)", header_style="bold")
        matrix.add_column("")
        for g in topo.gpus:
            matrix.add_column(f"GPU{g.index}", justify="center")
        for g, row in zip(topo.gpus, topo.links, strict=False):
            matrix.add_row(f"GPU{g.index}", *row)
        console.print(matrix)
    numa = ", ".join(f"node {k}: {v}" for k, v in topo.numa_nodes.items()) or "no NUMA information"
    console.print(f"CPUs: {topo.cpu_count}; NUMA: {numa}", highlight=False)
    if topo.cuda_visible_devices is not None:
        console.print(f"CUDA_VISIBLE_DEVICES={topo.cuda_visible_devices} (torch renumbers GPUs; NVML does not)")
    for note in topo.notes:
        console.print(f"[dim]{note}[/dim]", highlight=False)


def run(args: argparse.Namespace) -> int:
    """``gpucomm topo``: print the tables or ``--json``; exit 0 (a machine without GPUs is not an error)."""
    topo = collect()
    if getattr(args, "json", False):
        json.dump(topo.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(topo)
    return 0
