"""The hardware table: GPUs, their links and the networks between machines, as data with sources.

Every number carries its source.  Link bandwidths are the *collective* bandwidths NCCL achieves (busbw,
GB/s = 10^9 B/s per direction, nccl-tests' convention), not signalling rates, because the cost model's
ring formula ``2(n-1)/n * S/B`` is written in those units (nccl-tests' ``doc/PERFORMANCE.md``).  Where no
public source gives a number the entry says "derived:" and how, or "assumed:" — and calibration
(``gpucomm advise --calibrate``) replaces it with a measurement.

Semantics:

* :func:`get` returns ``None`` and warns for an unknown name — never a made-up number (STYLE.md 13).
* ``cpu-gloo`` is a profile *kind* with no datasheet: it exists only as a calibrated profile
  (:mod:`gpucomm.advisor.calibrate`), so ``get("cpu-gloo")`` warns and returns None.
* A profile is one kind of machine (``intra``) plus the network between machines (``inter``);
  :func:`with_network` swaps the network (``--network roce-400x8``).

.. note::
   Peak matrix TFLOP/s are NVIDIA's datasheet figures for dense
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
    gemm_efficiency: float | None = None
    """Sustained fraction of ``peak_tflops`` that large GEMMs reach in training; None: the planner's default
    (:data:`gpucomm.advisor.timing.GEMM_EFFICIENCY`).  Source in ``sources["gemm_efficiency"]``."""
    attention_efficiency: float | None = None
    """Sustained fraction of peak of causal flash attention (forward + backward); None: the planner's default
    (:data:`gpucomm.advisor.timing.ATTENTION_EFFICIENCY`)."""
    calibration: dict | None = None
    """Fitted values from :mod:`calibrate` (collective fits, compute, per-device costs); None when datasheet only."""

    @property
    def calibrated(self) -> bool:
        return bool(self.calibration)

    def peak_flops(self, dtype: str) -> float | None:
        """Peak FLOP/s for the compute dtype ("bf16", "fp16", "fp32", ...); None when unknown."""
        tf = self.peak_tflops.get(dtype)
        return None if tf is None else tf * 1e12


_DS_H100 = "NVIDIA H100 Tensor Core GPU datasheet, SXM5 column, dense"
_DS_H200 = "NVIDIA H200 Tensor Core GPU datasheet, SXM column, dense"
_DS_A100 = "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM/PCIe, dense"
_DS_H100P = "NVIDIA H100 Tensor Core GPU datasheet, PCIe column, dense"

_ALPHA_NVLINK = ("derived: 13.67 us for an 8 B all_reduce on 8xH100 (NVIDIA/exemplar-performance "
                 "microbenchmarks/nccl/README.md, DGX H100) / 2(n-1)=14 ring steps = 0.98 us per step")
_H_BW = ("365 GB/s: 8xH200 all_reduce with NVLS off, 365.6 GB/s busbw (stas00/ml-engineering network/README.md); "
         "ring on H100 365-370 for 2-8 GPUs (NVIDIA/nccl #1455). NVLS is off by policy")

NVSWITCH_H = Link(name="nvlink4-nvswitch", bandwidth_gbps=365.0, alpha_us=0.98,
                  source=f"bandwidth {_H_BW}; alpha {_ALPHA_NVLINK}")
NVSWITCH_A100 = Link(name="nvlink3-nvswitch", bandwidth_gbps=240.0, alpha_us=0.98,
                     source="derived: NVLink 3 = 300 GB/s per direction (A100 datasheet) x 0.8, NCCL's ~20% "
                            "protocol overhead on NVLink 4 (sjeaugey, nccl-tests #212); alpha assumed as NVLink 4")
PCIE_GEN5 = Link(name="pcie-gen5", bandwidth_gbps=48.0, alpha_us=0.98,
                 source="all_reduce busbw over PCIe Gen5: 48 GB/s (NVIDIA GTC 2024 NCCL talk); "
                        "alpha assumed as NVLink's (no public figure) — calibrate")
PCIE_GEN4 = Link(name="pcie-gen4", bandwidth_gbps=24.0, alpha_us=0.98,
                 source="derived: half of Gen5's 48 GB/s (Gen4 signals at half Gen5's lane rate); "
                        "alpha assumed as NVLink's (no public figure) — calibrate")

NETWORKS: dict[str, Link] = {
    "ib-ndr400x8": Link(name="ib-ndr400x8", bandwidth_gbps=8 * 48.0, alpha_us=14.0,
                        source="48 GB/s all_reduce busbw per 400G NIC (GTC24; sjeaugey nccl-tests #119) x 8 NICs; "
                               "DGX H100 8x400G measured 380 GB/s (GTC24). alpha: NCCL tuning.cc network "
                               "per-hop latency, Ring/Simple 14 us (NVIDIA/nccl src/graph/tuning.cc)"),
    "ib-edr100x8": Link(name="ib-edr100x8", bandwidth_gbps=8 * 12.0, alpha_us=14.0,
                        source="derived: half of HDR 200G's 24 GB/s per NIC (EDR signals at half HDR's rate) x 8 "
                               "NICs: the 100 GB/s per DGX-2H server of Shoeybi et al. 2019 (Megatron-LM, Sec. 5) "
                               "less the same protocol share; alpha as HDR — calibrate"),
    "opa-100x4": Link(name="opa-100x4", bandwidth_gbps=4 * 12.0, alpha_us=14.0,
                      source="derived: 4 Omni-Path 100 Gb/s links per node (the Jean Zay A100 nodes BLOOM trained "
                             "on, BigScience tr11 README) at EDR's 12 GB/s per 100 Gb/s link; alpha as IB"),
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


GiB = 2**30


def _gpu(name: str, description: str, tflops: dict[str, float], tflops_src: str, usable_gib: float,
         mem_src: str, hbm_gbps: float, hbm_src: str, intra: Link, inter: str | None,
         gpus_per_node: int = 8, gemm: tuple[float, str] | None = None,
         attention: tuple[float, str] | None = None) -> HardwareProfile:
    net = NETWORKS[inter] if inter else None
    eff, eff_src = gemm or (None, "the planner's default GEMM efficiency")
    att, att_src = attention or (None, "the planner's default flash-attention efficiency")
    return HardwareProfile(
        name=name, kind="gpu", description=description, peak_tflops=tflops, memory_bytes=int(usable_gib * GiB),
        memory_bw_gbps=hbm_gbps, max_gpus_per_node=gpus_per_node, intra=intra, inter=net, gemm_efficiency=eff,
        attention_efficiency=att, sources={"attention_efficiency": att_src,"peak_tflops": tflops_src, "memory_bytes": mem_src, "memory_bw_gbps": hbm_src,
                 "gemm_efficiency": eff_src,
                 "intra": intra.source, "inter": net.source if net else "single machine"})


_HOPPER_TF = {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}
_A100_TF = {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}
_V100_TF = {"fp32": 15.7, "fp16": 125.0}
_USABLE_80 = ("usable 79.25 GiB: the total capacity PyTorch reports for an 80 GB A100 (CUDA OOM message in "
              "levihsu/OOTDiffusion#235); 80 GB H100s report the same within 0.2 GiB (assumed)")
_USABLE_40 = "usable 39.50 GiB: the total capacity PyTorch reports for a 40 GB A100 (TianheWu/CoSeR#10)"
_HOPPER_GEMM = (0.45, "assumed: Hopper's 989 TFLOP/s dense peak is quoted at boost clock; sustained training "
                      "GEMMs at 700 W run lower clocks, and published H100 runs reach lower MFU than A100 runs of "
                      "the same models (LLM Foundry's MPT tables: 37-46% on H100 vs 45-53% on A100). Chosen with "
                      "those published rows in view — calibrate with your own train records")
_HOPPER_ATTN = (0.35, "FlashAttention-2 reaches only 35% of an H100's peak (Shah et al. 2024, "
                       "FlashAttention-3, abstract); FA3 reaches 75% where it is used — calibrate")
_V100 = "NVIDIA V100 Tensor Core GPU datasheet, SXM2 32 GB"

NVLINK2 = Link(name="nvlink2-cube-mesh", bandwidth_gbps=120.0, alpha_us=0.98,
               source="derived: NVLink 2 = 150 GB/s per direction per V100 (6 links x 25 GB/s, datasheet) x 0.8 "
                      "protocol efficiency as for NVLink 3; alpha assumed as NVLink 4 — calibrate")

NVSWITCH_V100 = Link(name="nvlink2-nvswitch", bandwidth_gbps=120.0, alpha_us=0.98,
                     source="derived: 300 GB/s between GPUs via NVSwitch (Shoeybi et al. 2019, Sec. 5; both "
                            "directions, 150 per direction = 6 NVLink 2 links x 25 GB/s) x 0.8 protocol "
                            "efficiency as for NVLink 3; alpha assumed as NVLink 4 — calibrate")

PROFILES: dict[str, HardwareProfile] = {p.name: p for p in (
    _gpu("h200-nvswitch", "8x H200 SXM, NVLink 4 + NVSwitch; 8x IB NDR 400G between machines",
         _HOPPER_TF, _DS_H200, 150109880320 / GiB, "usable 150,109,880,320 B = 139.8 GiB, the total memory "
         "the driver reports on our H200 (env block of benchmarks/results/train-gpt124m_h200x1_2026-12-02/records.jsonl; 141 GB on the datasheet)",
         4800, "4.8 TB/s HBM3e (NVIDIA H200 datasheet); 4254 GB/s measured device copy on our H200",
         NVSWITCH_H, "ib-ndr400x8", gemm=_HOPPER_GEMM,
         attention=_HOPPER_ATTN),
    _gpu("h100-nvswitch", "8x H100 SXM 80GB, NVLink 4 + NVSwitch; 8x IB NDR 400G between machines",
         _HOPPER_TF, _DS_H100, 79.25, _USABLE_80, 3350, "3.35 TB/s HBM3 (NVIDIA H100 datasheet, SXM5)",
         NVSWITCH_H, "ib-ndr400x8", gemm=_HOPPER_GEMM,
         attention=_HOPPER_ATTN),
    _gpu("h100-96gb-nvswitch", "8x H100 96GB HBM2e at 500 W (Meta Grand Teton, where torchtitan's H100 "
         "benchmarks ran), NVLink 4 + NVSwitch; 400 Gb/s RDMA per GPU between machines",
         _HOPPER_TF, _DS_H100, 95.25, "usable 95.25 GiB: assumed, 96 GiB less the 0.75 GiB the 80 GB parts lose "
         "(torchtitan docs/performance.md: 96GB HBM2e)", 2400,
         "2.4 TB/s HBM2e peak (pytorch/torchtitan docs/performance.md, Grand Teton platform); those GPUs run at "
         "the default 500 W power limit, not 700 W: lower sustained clocks this profile does not model",
         NVSWITCH_H, "ib-ndr400x8", gemm=_HOPPER_GEMM, attention=_HOPPER_ATTN),
    _gpu("a100-nvlink3", "8x A100 80GB SXM, NVLink 3 + NVSwitch; 8x IB HDR 200G between machines",
         _A100_TF, _DS_A100, 79.25, _USABLE_80, 2039, _DS_A100, NVSWITCH_A100, "ib-hdr200x8"),
    _gpu("a100-40gb-nvlink3", "8x A100 40GB SXM, NVLink 3 + NVSwitch; 8x IB HDR 200G between machines",
         _A100_TF, _DS_A100, 39.50, _USABLE_40, 1555, _DS_A100 + ": 1,555 GB/s for the 40 GB part",
         NVSWITCH_A100, "ib-hdr200x8"),
    _gpu("v100-nvlink2", "8x V100 SXM2 32GB, NVLink 2 hybrid cube-mesh (DGX-1); 4x IB EDR 100G between machines",
         _V100_TF, _V100, 31.75, "usable 31.75 GiB: assumed, 32 GB less the same ~0.25 GiB the 80 GB parts lose",
         900, _V100, NVLINK2, "ib-hdr200x8"),
    _gpu("v100-dgx2h", "16x V100 SXM3 32GB at 450 W (DGX-2H), NVSwitch; 8x IB EDR 100G between machines",
         {"fp32": 16.4, "fp16": 130.0}, "130 TFLOP/s fp16: Shoeybi et al. 2019 (Megatron-LM, Sec. 5.1.1) give "
         "39 TFLOP/s as 30% of the theoretical peak of one DGX-2H GPU; fp32 scaled by the same clock ratio "
         "from the V100 datasheet's 15.7/125", 31.75,
         "usable 31.75 GiB: assumed, 32 GB less the same ~0.25 GiB the 80 GB parts lose", 900, _V100,
         NVSWITCH_V100, "ib-edr100x8", gpus_per_node=16),
    _gpu("pcie-gen5", "8x H100 PCIe 80GB on PCIe Gen5, no NVLink; 8x IB NDR 400G between machines",
         {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}, _DS_H100P, 79.25, _USABLE_80,
         2000, _DS_H100P, PCIE_GEN5, "ib-ndr400x8", gemm=_HOPPER_GEMM,
         attention=_HOPPER_ATTN),
    _gpu("pcie-gen4", "8x A100 PCIe 80GB on PCIe Gen4, no NVLink; 8x IB HDR 200G between machines",
         _A100_TF, _DS_A100, 79.25, _USABLE_80, 1935, _DS_A100, PCIE_GEN4, "ib-hdr200x8"),
)}

_CALIBRATION_ONLY = {"cpu-gloo": "a CPU has no datasheet peak; build this profile with "
                                 "`gpucomm advise --calibrate RESULTS_DIR --save-profile cpu.json`, "
                                 "then pass `--profile cpu.json`"}


def describe() -> list[str]:
    """``--list-hardware``: one block per profile and network, every figure with its source."""
    lines: list[str] = []
    for p in PROFILES.values():
        peak = ", ".join(f"{k} {v:g}" for k, v in p.peak_tflops.items())
        lines += [f"{p.name}: {p.description}",
                  f"  peak TFLOP/s (dense): {peak} — {p.sources['peak_tflops']}",
                  f"  memory: {p.memory_bytes / GiB:.2f} GiB usable — {p.sources['memory_bytes']}",
                  f"  HBM: {p.memory_bw_gbps:g} GB/s — {p.sources['memory_bw_gbps']}",
                  f"  intra-node: {p.intra.name}, {p.intra.bandwidth_gbps:g} GB/s busbw, alpha {p.intra.alpha_us:g} us"
                  f" — {p.intra.source}",
                  f"  network (default): {p.inter.name if p.inter else 'none'}; {p.max_gpus_per_node} GPUs per node"]
    lines.append("networks (--network):")
    for link in NETWORKS.values():
        lines.append(f"  {link.name}: {link.bandwidth_gbps:g} GB/s per node, alpha {link.alpha_us:g} us — {link.source}")
    return lines


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
