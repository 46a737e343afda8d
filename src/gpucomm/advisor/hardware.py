"""The hardware table: GPUs, their links and the networks between machines, as data with sources.

Every number carries its source.  Link bandwidths are the *collective* bandwidths NCCL achieves (busbw,
GB/s = 10^9 B/s per direction, nccl-tests' convention), not signalling rates, because the cost model's
ring formula ``2(n-1)/n * S/B`` is written in those units (``reference/cost-model.md`` §1.1).  Where no
reference gives a number the entry says "derived:" and how, or "assumed:" — and calibration
(``gpucomm advise --calibrate``) replaces it with a measurement.

Semantics:

* :func:`get` returns ``None`` and warns for an unknown name — never a made-up number (STYLE.md 13).
* ``cpu-gloo`` is a profile *kind* with no datasheet: it exists only as a calibrated profile
  (:mod:`gpucomm.advisor.calibrate`), so ``get("cpu-gloo")`` warns and returns None.
* A profile is one kind of machine (``intra``) plus the network between machines (``inter``);
  :func:`with_network` swaps the network (``--network roce-400x8``).

.. note::
   Peak matrix TFLOP/s are not in our reference files; they are NVIDIA's datasheet figures for dense
   math (no sparsity), cited by datasheet name.  Training never reaches them: the step-time model applies
   a stated MFU or a measured compute time.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field

__all__ = ["NETWORKS", "PROFILES", "HardwareProfile", "Link", "get", "get_network", "names", "with_network"]

GB = 10**9


@dataclass(frozen=True, kw_only=True, slots=True)
class Link:
    """One tier of the interconnect, as the cost model sees it.

    ``bandwidth_gbps`` is the busbw a ring collective reaches per GPU (intra-node) or per machine, summed
    over its NICs (inter-node); ``alpha_us`` the latency of one ring step (one hop).
    """

    name: str
    bandwidth_gbps: float
    """Achievable collective bandwidth, GB/s per direction (per GPU intra-node; per node, all NICs, inter-node)."""
    alpha_us: float
    """Latency of one ring step, microseconds."""
    source: str
    """Where both numbers come from."""


@dataclass(frozen=True, kw_only=True, slots=True)
class HardwareProfile:
    """One kind of machine: its GPU, the link between its GPUs and the network between machines."""

    name: str
    kind: str
    """"gpu" (datasheet-backed) or "cpu-gloo" (calibration only)."""
    description: str
    peak_tflops: dict[str, float]
    """Dense matrix peak by dtype ("fp32", "tf32", "bf16", "fp16", "fp8"); empty when unknown."""
    memory_bytes: int | None
    """Device memory capacity; None when unknown (then every strategy 'fits')."""
    memory_bw_gbps: float | None
    """Device memory bandwidth, GB/s (optimizer step time); None when unknown."""
    max_gpus_per_node: int
    intra: Link
    inter: Link | None
    """The network between machines; None for a single-machine profile."""
    sources: dict[str, str] = field(default_factory=dict)
    """Source of each field above, by field name."""
    calibration: dict | None = None
    """Fitted values from :mod:`calibrate` (collective fits, compute, per-device costs); None when datasheet only."""

    @property
    def calibrated(self) -> bool:
        return bool(self.calibration)

    def peak_flops(self, dtype: str) -> float | None:
        """Peak FLOP/s for the compute dtype ("bf16-autocast" computes in bf16); None when unknown."""
        key = {"bf16-autocast": "bf16", "bf16-mixed": "bf16", "fp16-mixed": "fp16"}.get(dtype, dtype)
        tf = self.peak_tflops.get(key)
        return None if tf is None else tf * 1e12


_DS_H100 = "NVIDIA H100 Tensor Core GPU datasheet, SXM5 column, dense (not in reference files)"
_DS_H200 = "NVIDIA H200 Tensor Core GPU datasheet, SXM column, dense (not in reference files)"
_DS_A100 = "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM/PCIe, dense (not in reference files)"
_DS_H100P = "NVIDIA H100 Tensor Core GPU datasheet, PCIe column, dense (not in reference files)"

_ALPHA_NVLINK = ("derived: 13.67 us for an 8 B all_reduce on 8xH100 (exemplar-performance README, "
                 "collective-bench.md §3) / 2(n-1)=14 ring steps = 0.98 us per step")
_H_BW = ("365 GB/s: 8xH200 all_reduce with NVLS off, 365.6 GB/s busbw (ml-engineering network/README.md, "
         "collective-bench.md §3); ring on H100 365-370 for 2-8 GPUs (NCCL #1455). NVLS is off by policy")

NVSWITCH_H = Link(name="nvlink4-nvswitch", bandwidth_gbps=365.0, alpha_us=0.98,
                  source=f"bandwidth {_H_BW}; alpha {_ALPHA_NVLINK}")
NVSWITCH_A100 = Link(name="nvlink3-nvswitch", bandwidth_gbps=240.0, alpha_us=0.98,
                     source="derived: NVLink 3 = 300 GB/s per direction (A100 datasheet) x 0.8, NCCL's ~20% "
                            "protocol overhead on NVLink 4 (sjeaugey, nccl-tests #212); alpha assumed as NVLink 4")
PCIE_GEN5 = Link(name="pcie-gen5", bandwidth_gbps=48.0, alpha_us=0.98,
                 source="all_reduce busbw over PCIe Gen5: 48 GB/s (GTC24 slide, collective-bench.md §3); "
                        "alpha assumed as NVLink's (no reference figure) — calibrate")
PCIE_GEN4 = Link(name="pcie-gen4", bandwidth_gbps=24.0, alpha_us=0.98,
                 source="derived: half of Gen5's 48 GB/s (Gen4 signals at half Gen5's lane rate); "
                        "alpha assumed as NVLink's (no reference figure) — calibrate")

NETWORKS: dict[str, Link] = {
    "ib-ndr400x8": Link(name="ib-ndr400x8", bandwidth_gbps=8 * 48.0, alpha_us=14.0,
                        source="48 GB/s all_reduce busbw per 400G NIC (GTC24; sjeaugey nccl-tests #119) x 8 NICs; "
                               "DGX H100 8x400G measured 380 GB/s (GTC24). alpha: NCCL tuning.cc network "
                               "per-hop latency, Ring/Simple 14 us (cost-model.md §1.2)"),
    "ib-hdr200x8": Link(name="ib-hdr200x8", bandwidth_gbps=8 * 24.0, alpha_us=14.0,
                        source="24 GB/s per 200G NIC, NCCL's rule (sjeaugey nccl-tests #119) x 8 NICs; alpha as NDR"),
    "roce-400x8": Link(name="roce-400x8", bandwidth_gbps=8 * 39.0, alpha_us=14.0,
                       source="derived: 8xH100 with 4x400G RoCE on 5 nodes, ring 190 GB/s busbw (NCCL #1368) "
                              "-> 39 GB/s per NIC under this model; x 8 NICs. A known bad case reached only "
                              "216-231 GB/s on 2x8 H100 (NCCL #2409) — calibrate. alpha as IB"),
    "roce-400x4": Link(name="roce-400x4", bandwidth_gbps=4 * 39.0, alpha_us=14.0,
                       source="derived: ring 190 GB/s busbw, 8xH100 with 4x400G RoCE, 5 nodes (NCCL #1368) "
                              "-> 39 GB/s per NIC; x 4 NICs"),
}


def _gpu(name: str, description: str, tflops: dict[str, float], tflops_src: str, mem_gb: float,
         mem_src: str, hbm_gbps: float, hbm_src: str, intra: Link, inter: str | None) -> HardwareProfile:
    net = NETWORKS[inter] if inter else None
    return HardwareProfile(
        name=name, kind="gpu", description=description, peak_tflops=tflops, memory_bytes=int(mem_gb * GB),
        memory_bw_gbps=hbm_gbps, max_gpus_per_node=8, intra=intra, inter=net,
        sources={"peak_tflops": tflops_src, "memory_bytes": mem_src, "memory_bw_gbps": hbm_src,
                 "intra": intra.source, "inter": net.source if net else "single machine"})


_HOPPER_TF = {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}
_A100_TF = {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}

PROFILES: dict[str, HardwareProfile] = {p.name: p for p in (
    _gpu("h200-nvswitch", "8x H200 SXM, NVLink 4 + NVSwitch; 8x IB NDR 400G between machines",
         _HOPPER_TF, _DS_H200, 141, "141 GB HBM3e (ml-engineering compute/accelerator, collective-bench.md §3)",
         4800, "4.8 TB/s HBM3e (collective-bench.md §3); 4254 GB/s measured copy (measured-h200.md)",
         NVSWITCH_H, "ib-ndr400x8"),
    _gpu("h100-nvswitch", "8x H100 SXM, NVLink 4 + NVSwitch; 8x IB NDR 400G between machines",
         _HOPPER_TF, _DS_H100, 80, "80 GB HBM3 (collective-bench.md §3)",
         3350, "3.35 TB/s HBM3 (collective-bench.md §3)", NVSWITCH_H, "ib-ndr400x8"),
    _gpu("a100-nvlink3", "8x A100 80GB SXM, NVLink 3 + NVSwitch; 8x IB HDR 200G between machines",
         _A100_TF, _DS_A100, 80, _DS_A100, 2039, _DS_A100, NVSWITCH_A100, "ib-hdr200x8"),
    _gpu("pcie-gen5", "8x H100 PCIe 80GB on PCIe Gen5, no NVLink; 8x IB NDR 400G between machines",
         {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}, _DS_H100P, 80, _DS_H100P,
         2000, _DS_H100P, PCIE_GEN5, "ib-ndr400x8"),
    _gpu("pcie-gen4", "8x A100 PCIe 80GB on PCIe Gen4, no NVLink; 8x IB HDR 200G between machines",
         _A100_TF, _DS_A100, 80, _DS_A100, 1935, _DS_A100, PCIE_GEN4, "ib-hdr200x8"),
)}

_CALIBRATION_ONLY = {"cpu-gloo": "a CPU has no datasheet peak; build this profile with "
                                 "`gpucomm advise --calibrate RESULTS_DIR --save-profile cpu.json`, "
                                 "then pass `--profile cpu.json`"}


def names() -> list[str]:
    """Known profile names, sorted."""
    return sorted(PROFILES)


def get(name: str) -> HardwareProfile | None:
    """The profile called ``name``, or ``None`` with a warning when there is none.

    ``None`` is the honest answer for hardware we hold no figures for; callers turn it into a usage error.
    """
    profile = PROFILES.get(str(name).lower())
    if profile is None:
        hint = _CALIBRATION_ONLY.get(str(name).lower(), f"known profiles: {', '.join(names())}")
        warnings.warn(f"hardware {name!r}: no profile ({hint})", stacklevel=2)
    return profile


def get_network(name: str) -> Link | None:
    """The inter-node network called ``name``, or ``None`` with a warning."""
    link = NETWORKS.get(str(name).lower())
    if link is None:
        warnings.warn(f"network {name!r}: no profile (known networks: {', '.join(sorted(NETWORKS))})",
                      stacklevel=2)
    return link


def with_network(profile: HardwareProfile, network: Link) -> HardwareProfile:
    """``profile`` with its inter-node network replaced."""
    sources = {**profile.sources, "inter": network.source}
    return dataclasses.replace(profile, inter=network, sources=sources,
                               name=f"{profile.name}+{network.name}")
