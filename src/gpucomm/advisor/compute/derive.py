"""Compute profiles derived for GPUs we did not measure, from one we did on the same die.

The H100 SXM and the H200 are the same GH100 chip — 132 SMs, 528 tensor cores, 989.4 dense bf16 TFLOP/s at
the same 1,830 MHz tensor-core boost, the same 700 W power limit — with different memory: 80 GB of HBM3 at
3.35 TB/s against 141 GB of HBM3e at 4.8 TB/s (NVIDIA H100 Tensor Core GPU datasheet, SXM column; NVIDIA H200
Tensor Core GPU datasheet, SXM column; Hopper architecture whitepaper: 132 SMs on H100 SXM5).  A measured H200
time splits into a compute-bound part (matmuls and attention, as the profile measures them alone) and a
memory-bound part (everything else in the layer, the loss's passes over the logits, the embedding, the
optimizer), and the H100 SXM's time is

    compute x (H200 sustained SM clock / H100 sustained SM clock) + memory x (4.8 / 3.35)

The sustained clock is what the power limit allows under load, and the two GPUs do not sustain the same one: the
HBM3e stacks draw more of the shared 700 W than the H100's HBM3, so under the same training load the H200's die
runs slower. Measured with one script (``benchmarks/sustained_clock.py``: a layer's forward and backward back to
back for seconds, NVML's SM clock over the run's second half) at five layer shapes of the single-GPU check on two
H200s (2026-12-04) and one H100 80GB HBM3 (2026-12-06), both at 700 W: at the four shapes the power limit set on
every run, the H200 settled at 1,635-1,882 MHz and the H100 at 1,680-1,905 MHz; the median ratio is 0.966
(``benchmarks/clock_ratio.py``, clock-ratio_h200-h100_2026-12-06.txt; the one NVML sample a case of the single-GPU
runs reads, 26 H200 runs against 5 H100 runs on four machines, gives 0.948 over the eleven cases at the limit).
That ratio is the compute-bound factor. It prices sustained work: a point timed in a short window runs at the boost
clock on either GPU, and the H200 profile's points reach a step's clock through the factor a layer takes inside
whole steps (:meth:`gpucomm.advisor.compute.profile._Tables.in_step`). Until 2026-12-06 the factor was 1 (the
clocks assumed equal); a lent H100 80GB HBM3 at 700 W (2026-12-05) ran ``gpucomm measure``'s short-window matmul
points at a median 1.000 of that derivation, its 192 layer points at 0.972 (10th-90th percentile 0.92-1.03;
derive-check-r2_h100x1_2026-12-05.txt), the optimizer step at 0.917 and the embedding at 0.554 of the memory
factor's prices (benchmarks/derive_check.py; derive-check_h100x1_2026-12-05.txt), and its profiles read 1,125-1,170
MHz at the end of a second of 8192-wide GEMMs (``gpucomm measure``'s one NVML sample a profile), where the shipped
H200 profile read 1,500 MHz and its merge on the same machine 1,245: one sample after one second is not a sustained
clock. Those partial profiles are a check, not a replacement: the memory factor stays the datasheets' — the copy
bandwidth ``gpucomm measure`` reads, 2,807-2,994 GB/s on that H100 against 3,984 and 4,242 GB/s in the two H200
profiles, gives ratios of 1.33-1.51 around 4.8/3.35 = 1.43. Host work (launch gaps, the step's own work) is not
scaled: ``--host this`` on an H100 80GB HBM3 times the profile's host-paced steps there and prices that machine's
host. Every figure is returned as an assumption line with its source.

Derived profiles: ``h100-nvswitch`` (H100 SXM 80 GB at 700 W).  The H100 96 GB at 500 W of
``h100-96gb-nvswitch`` and the H100 PCIe (114 SMs, 350 W) are other configurations whose sustained clocks
no public figure gives: they stay on the datasheet model.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucomm.advisor.compute.profile import ComputeProfile, ProfileSource, Scale

__all__ = ["TARGETS", "Target", "derive"]

_DS_H100 = "NVIDIA H100 Tensor Core GPU datasheet, SXM column"
_DS_H200 = "NVIDIA H200 Tensor Core GPU datasheet, SXM column"


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """A GPU derived from a measured one of the same die."""

    hardware: str
    """The ``--hardware`` profile name it prices."""
    gpu: str
    device_names: tuple[str, ...]
    """The names CUDA reports for it (``torch.cuda.get_device_name``): where ``--host this`` may time the
    profile's host-paced steps for it (:func:`gpucomm.advisor.compute.measure.host_ratios`)."""
    base_gpu: str
    """The measured GPU it derives from (a fragment of the profile's device name)."""
    hbm_tbps: float
    base_hbm_tbps: float
    hbm_source: str
    power_w: float
    power_source: str
    clock_ratio: float
    """The measured GPU's sustained SM clock over this one's at the power limit: the compute-bound factor."""
    clock_source: str


TARGETS = {t.hardware: t for t in (
    Target(hardware="h100-nvswitch", gpu="H100 SXM 80GB", device_names=("NVIDIA H100 80GB HBM3",),
           base_gpu="H200", hbm_tbps=3.35, base_hbm_tbps=4.8,
           hbm_source=f"3.35 TB/s HBM3 ({_DS_H100}) against 4.8 TB/s HBM3e ({_DS_H200})",
           power_w=700.0, power_source=f"700 W max TDP ({_DS_H100}; {_DS_H200}: up to 700 W)",
           clock_ratio=0.966,
           clock_source="H200 1,635-1,882 MHz against H100 80GB HBM3 1,680-1,905 MHz under the same layer loads at "
                        "700 W, median of four shapes (gpucomm benchmarks/sustained_clock.py, clock_ratio.py, "
                        "2026-12-06)"),
)}


def derive(profile: ComputeProfile, hardware: str) -> ProfileSource | None:
    """The compute source of ``hardware`` derived from ``profile``, or None when it is not a target of it."""
    t = TARGETS.get(hardware)
    if t is None or t.base_gpu.lower() not in profile.gpu.lower():
        return None
    memory = t.base_hbm_tbps / t.hbm_tbps
    base_w = profile.device.get("power_limit_w")
    same_power = base_w is not None and abs(base_w - t.power_w) < 1.0
    compute = t.clock_ratio
    clock_line = (f"derived for {t.gpu}: compute-bound time x {compute:g} = the measured {profile.gpu}'s "
                  f"sustained SM clock over the {t.gpu}'s: {t.clock_source}"
                  f" — same GH100 die, 132 SMs, 989.4 dense bf16 TFLOP/s, {t.power_source}")
    if not same_power:
        clock_line += (f"; the {profile.gpu} profile ran at "
                       + (f"{base_w:g} W" if base_w is not None else "an unknown power limit")
                       + f", not {t.power_w:g} W, so this clock ratio is the weaker assumption")
    lines = [clock_line,
             f"derived for {t.gpu}: memory-bound time x {memory:.4f} = {t.base_hbm_tbps:g} / {t.hbm_tbps:g} TB/s, "
             f"{t.hbm_source}",
             "derived: launch gaps and the step's own host work are the H200 profile's measuring host's (not "
             f"scaled; --host this on an {t.device_names[0]} times this machine's)"]
    return ProfileSource(profile, scale=Scale(compute=compute, memory=memory),
                         label=f"derived for {t.gpu} from the {profile.gpu} profile ({profile.source})",
                         assumptions=lines, probe_gpus=t.device_names)
