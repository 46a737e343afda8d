"""A compute profile: what ``gpucomm measure`` timed on one GPU, saved as JSON, and looked up by the planner.

**Format** (``schema_version`` 1; JSON, never pickle)::

    {"kind": "gpucomm-compute-profile", "schema_version": 1,
     "device": {"type": "cuda", "name": "NVIDIA H200", "sm_clock_max_mhz": ..., "sm_clock_sustained_mhz": ...,
                "power_limit_w": ..., "memory_bytes": ..., "copy_gbps": ...},
     "software": "eager", "precision": "bf16", "grid": "default",
     "env": {the env block: versions, devices, host, command line, ...},
     "points": {"layer": [...], "kernels": [...], "attention": [...], "embedding": [...], "head": [...],
                "optimizer": [...], "step": [...]}}

Each point is its shape (:mod:`gpucomm.advisor.compute.shapes`, as a dict) plus what was measured, in seconds
(median of the timed iterations) and bytes: a layer's ``fwd_s`` and ``bwd_s`` (the checkpointing mode's
recomputation inside ``bwd_s``) and its peak allocated and reserved bytes; a layer's matmuls replayed alone
(``kernels``: ``gemm_fwd_s``, ``gemm_bwd_s``); attention's ``fwd_s``, ``bwd_s``; the embedding's and the
head-with-loss's forward + backward ``seconds``; the optimizer step's ``seconds``; a whole small step's
``seconds``, ``peak_allocated_bytes`` and ``peak_reserved_bytes``.

**Lookup** (:class:`ProfileSource`): one micro-batch of a layout on one GPU is

    embedding + layers x layer + head-with-loss + the step's own work (first stage / last stage / any)

where a layer is its attention (looked up at its head dim, ``seq / cp`` and ``mb x heads / tp`` rows; with
context parallel ``cp`` times that, each GPU's queries meeting every key of the ring), its matmuls (the
``kernels`` points: seconds per matmul FLOP, ``6 x tokens x weights / tp``), and the rest of the layer — norms,
activations, rotary, casts, residual adds, launch gaps: the layer point minus its attention and its matmuls —
looked up as seconds per byte of the activations the layer stores (:func:`_ew_bytes`), each over tp, hidden and
tokens, plus what the checkpointing mode reruns (**Checkpointing** below).  The rest is elementwise work: it
scales with activation bytes, not FLOPs, so a layer whose MLP is narrower or whose KV heads are fewer than the
measured layers' is not priced as if its norms shrank with its matmuls (per FLOP, the H200 profile priced a
llama-160m layer, 2.7h MLP and 7 heads per KV head, 16% under its measured time; per byte 11%,
sustained-clock_h200x1_2026-12-04.txt).  A profile without matmul points prices the rest per matmul FLOP.  Every quantity is normalised by the FLOPs (bytes for
the memory-bound embedding and optimizer) that make it nearly constant, and interpolated in log space
(:mod:`gpucomm.advisor.compute.interpolate`); outside the grid the answer is *extrapolated* and says so
(``ComputeParts.extrapolated``).  The step's own work is what whole measured steps take beyond the sum of their
parts (autograd start-up, ``zero_grad``, launch gaps between modules); the allocator's margin is the measured
``peak_reserved - peak_allocated`` of the two-layer steps per byte of fp32 logits (the loss's transient blocks
are the largest the allocator caches), interpolated over hidden and tokens.  The margin of steps with more
layers is measured (the default grid's whole steps of 8 and 24 layers) but not modelled: at the profile's
shapes it grows with the layers at some widths and shrinks at others (GPT 1536-wide, full checkpointing: 0.99,
3.36, 3.82 GiB at 2, 8, 24 layers; Llama 1536-wide: 9.27, 8.16, 5.66 GiB), so no rule over layers holds.

A layer inside a whole step runs a little slower than its points price it (launch gaps between its kernels; a
step holds the GPU at its power limit for seconds, and its allocator and caches are a step's): where the profile
has whole ``none`` or ``full`` steps of one shape at two layer counts and the layer is device-bound there, its
marginal time between them — the optimizer step over the extra layers' parameters taken out — over the device
work the lookups price for it (0.95-1.13 on the H200, busy times) multiplies the layer's time
(:meth:`_Tables.in_step`; interpolated over hidden and tokens, ``full`` for full checkpointing, ``none`` for
every other mode).

**Device time**: each layer, matmul and attention point carries, beside its measured time, its *busy* time —
the seconds its kernels, copies and memsets kept the device busy, read from ``torch.profiler`` over three more
iterations (``busy_fwd_s``, ``busy_bwd_s``, ``busy_gemm_fwd_s``...; :func:`device_s`).  The lookups price the
device from busy times where a profile has them: a small point timed alone is paced by the host — issuing one
layer's forward and backward takes 2-3 ms of Python and autograd on the H200's host — so its measured time is
the host's, and a per-FLOP or per-byte rate read from it carried that host time into larger layers (in the
first H200 profile, of 2026-12-04, a GPT layer 1,536 wide at 4,096 tokens measured 2.81 ms for 2.09 ms busy, 768 wide 2.59 ms for
0.92 ms; device-bound points' busy times are 0.94-0.98 of their measured ones, the launch gaps; gpt-1.3b with
per-op checkpointing, device-bound at 101.0 ms, was priced 115.4 ms from measured times,
advisor-single-gpu-r14_h200x1_2026-12-04).  What a step adds to its kernels' busy time — launch gaps, caches
and clocks of a whole step — is the layer's factor inside a step (below).  A busy time is read in a pass of its
own, after every point is timed (:func:`gpucomm.advisor.compute.measure.measure`); the device cannot be busy
longer than the interval the same work took, so a busy time above its point's measured time is the two passes'
noise or a slower GPU in the busy pass, and the lookups take the measured time there (:func:`device_s`;
:func:`busy_above` counts them).  In the first H200 profile (2026-12-04, its busy times read on another machine
than its timings) 8 of 281 layer, 26 of 152 matmul and 5 of 125 attention points' busy times exceed their
measured ones; in the two whole profiles measured on one machine each on 2026-12-05, 52, 55 and 23 (r27) and 75,
68 and 21 (r28, the shipped one) — there device-bound layers' busy times are 0.98 of their measured ones (0.96
in the first), and in r27 GPT layers 3,072 wide at 4,096 tokens read 5-9% above, which priced GPT layers inside
whole steps at 0.95-0.99 of their busy-priced work (benchmarks/results/advisor-profile-r27_h200x1_2026-12-05/
README.md, advisor-profile-r28_h200x1_2026-12-05/README.md).

**Checkpointing** (``ac``): ``torch.utils.checkpoint`` reruns forward work in the backward, at the rates the
layer ran it forward — priced from the ``ac=none`` lookups, not from the checkpointed points' extra time per FLOP
(those points are host-bound at small shapes: an isolated ``op`` layer runs a Python policy per op, and its
extra time divided by few FLOPs, carried to a larger layer, priced it 23-27% too slow on the H200,
benchmarks/results/advisor-single-gpu_h200x1_2026-12-04.txt).  What is rerun
(:meth:`~gpucomm.advisor.compute.shapes.LayerShape.recomputed_mm_share`): the checkpoint stops as soon as the
last saved tensor is back (early stop, PyTorch's default), so the layer's last matmul never runs again; ``full``
reruns the other matmuls, the elementwise forward and attention's forward; ``op`` the elementwise forward and
the matmuls its policy does not save; ``selective`` attention's forward.  The elementwise forward is the
forward's rest minus its matmuls replayed alone.  On the profile's own checkpointed points that are not
host-bound this prices within a median 1-2%, and whole two-layer steps with ``full`` within 2%.

**Host** (``ComputeParts.host_layer_s``): an eager layer is also work for the host — Python, dispatch, launches;
``op``'s policy runs Python for every op — and a point whose device work (as priced above) fills less than half
its measured time was paced by the host.  The host's time of a (family, mode) is the median time of its
host-bound points (a property of the code, not of the shape: the kernels issued are the same); the step takes
the longer of the device's work and the host's (:mod:`gpucomm.advisor.timing`, **Host**).  Isolated points
overstate it (each times its own forward and backward call); where the profile has whole steps of a (family,
mode) at two layer counts (``gpucomm measure``'s default grid times ``op`` steps of 2 and 8 layers, ``full``
steps of 2 and 8 and ``none`` steps of 2 and 8 at 4,096 tokens), a layer's marginal time between them, where
host-paced, is the host's time instead, and a mode whose steps are all device-bound has none.  Not applied to
``fused``.  The host's time is the measuring machine's CPU's (the env block names it; the shipped profile was
measured whole on one machine, so that every marginal divides one machine's steps): the shipped H200 profile's
layers take 4.4 ms (GPT ``op``), 12.2 ms (Llama ``op``), 4.3 ms (GPT ``full``) and 3.9 ms (Llama ``full``) of
host time a layer on its Xeon host (the first profile's, on another Xeon host: 5.5, 8.4, 3.3 and 5.6 ms), and
one host-paced step ran 102, 159 and 173 ms on three lent H200 machines of one day
(advisor-single-gpu-r3/-r4/-r5_h200x1_2026-12-04); a profile measured on the training machine carries its
host.

**Software** (``Job.software``; the default ``eager``): a profile measures the stack it ran — ``eager`` (plain
PyTorch) or ``compiled`` (each module under ``torch.compile``: ``gpucomm measure --software compiled``).
``fused`` (Megatron-Core / Transformer Engine's fused kernels) is derived from an eager profile: the layer's
matmuls as measured alone (``kernels`` points) and its attention, plus the memory-bound traffic of fused
elementwise kernels (:data:`~gpucomm.advisor.compute.datasheet.EW_PASSES` passes over the activations a layer
stores, Korthikanti et al. 2022) at the copy bandwidth measured on the same GPU.

Errors are :class:`ProfileError` (a ``ValueError``): one line naming the argument, what was expected, what came
and the fix.  Nothing here imports torch.
"""

from __future__ import annotations

import functools
import json
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucomm.advisor.compute import datasheet
from gpucomm.advisor.compute.interpolate import Axis, GridError, nested
from gpucomm.advisor.compute.parts import ComputeParts, Lookup
from gpucomm.advisor.compute.shapes import (
    AttentionShape,
    EmbeddingShape,
    HeadShape,
    LayerShape,
    family_of,
)
from gpucomm.advisor.job import SOFTWARE
from gpucomm.advisor.memory import activation_terms

__all__ = ["BUSY_KEYS", "KIND", "POINT_KINDS", "PROBED_MODES", "SCHEMA_VERSION", "SOFTWARE", "ComputeProfile", "ProfileError",
           "ProfileSource", "busy_above", "device_s", "expected_gpu", "layer_shape_of", "load", "save"]

KIND = "gpucomm-compute-profile"
SCHEMA_VERSION = 1
POINT_KINDS = ("layer", "kernels", "attention", "embedding", "head", "optimizer", "step")
_REQUIRED = {
    "layer": ("family", "hidden", "heads", "kv_heads", "ffn", "tp", "seq", "mb", "ac", "fwd_s", "bwd_s"),
    "kernels": ("family", "hidden", "heads", "kv_heads", "ffn", "tp", "seq", "mb", "gemm_fwd_s", "gemm_bwd_s"),
    "attention": ("head_dim", "heads", "seq", "mb", "fwd_s", "bwd_s"),
    "embedding": ("vocab", "hidden", "seq", "mb", "seconds"),
    "head": ("family", "vocab", "hidden", "seq", "mb", "loss", "seconds"),
    "optimizer": ("params", "seconds"),
    "step": ("layer", "vocab", "layers", "loss", "seconds", "peak_allocated_bytes", "peak_reserved_bytes"),
}


class ProfileError(ValueError):
    """A compute profile that cannot be read, belongs to another GPU, or lacks what was asked (one line)."""


@dataclass(kw_only=True, slots=True)
class ComputeProfile:
    """One profile (module docstring)."""

    device: dict[str, Any]
    software: str = "eager"
    precision: str = "bf16"
    grid: str = ""
    env: dict[str, Any] = field(default_factory=dict)
    points: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    source: str = ""
    """Where it was read from (a path, or "shipped: h200.json"); not saved."""

    @property
    def gpu(self) -> str:
        """The device name ("NVIDIA H200", "cpu")."""
        return str(self.device.get("name", ""))

    @property
    def cpu(self) -> bool:
        return self.device.get("type") == "cpu"

    def to_json(self) -> dict[str, Any]:
        return {"kind": KIND, "schema_version": SCHEMA_VERSION, "device": self.device, "software": self.software,
                "precision": self.precision, "grid": self.grid, "env": self.env,
                "points": {k: self.points.get(k, []) for k in POINT_KINDS}}


def save(profile: ComputeProfile, path: str | os.PathLike) -> None:
    """Write ``profile`` as JSON (to a temporary file first, then renamed: no half-written profile)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(profile.to_json(), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _fail(arg: str, path: str, what: str, fix: str) -> ProfileError:
    return ProfileError(f"{arg} {path}: {what}; {fix}")


def from_json(data: Any, *, arg: str = "--compute-profile", path: str = "") -> ComputeProfile:
    """Check and build a profile from parsed JSON (see :func:`load` for the errors)."""
    fix = "pass a file written by gpucomm measure --out FILE"
    if not isinstance(data, dict) or data.get("kind") != KIND:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise _fail(arg, path, f"not a compute profile (kind {kind!r}, expected {KIND!r})", fix)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise _fail(arg, path, f"schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}",
                    "measure it again with this gpucomm (gpucomm measure --out FILE)")
    device, points = data.get("device"), data.get("points")
    if not isinstance(device, dict) or not device.get("name") or not isinstance(points, dict):
        raise _fail(arg, path, "no 'device' name or 'points' table", fix)
    if data.get("software") not in SOFTWARE[:2]:
        raise _fail(arg, path, f"software {data.get('software')!r}, expected eager or compiled", fix)
    for kind in POINT_KINDS:
        rows = points.get(kind, [])
        if not isinstance(rows, list):
            raise _fail(arg, path, f"points[{kind!r}] is {type(rows).__name__}, expected a list", fix)
        for i, row in enumerate(rows):
            missing = [k for k in _REQUIRED[kind] if not isinstance(row, dict) or k not in row]
            if missing:
                raise _fail(arg, path, f"points[{kind!r}][{i}] lacks {', '.join(missing)}", fix)
            for k, v in row.items():
                if k.endswith("_s") or k == "seconds":
                    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                        raise _fail(arg, path, f"points[{kind!r}][{i}][{k!r}] = {v!r}, expected seconds >= 0",
                                    fix)
    return ComputeProfile(device=dict(device), software=data["software"], precision=str(data.get("precision", "")),
                          grid=str(data.get("grid", "")), env=dict(data.get("env") or {}),
                          points={k: list(points.get(k, [])) for k in POINT_KINDS}, source=path)


def load(path: str | os.PathLike, *, arg: str = "--compute-profile") -> ComputeProfile:
    """Read a profile.

    Raises:
        ProfileError: the file cannot be read, is not JSON, is another kind of JSON, has another schema version,
            or a point lacks a field (one line naming ``arg``, the path, what was wrong and the fix).
    """
    p = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise _fail(arg, p, f"cannot be read ({exc.strerror or exc})", "check the path") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(arg, p, f"not JSON ({exc.msg} at line {exc.lineno})",
                    "pass a file written by gpucomm measure --out FILE") from None
    return from_json(data, arg=arg, path=p)


_GPU_OF_HARDWARE = {"h200": "H200", "h100-96gb": "H100 96GB", "h100": "H100 80GB", "a100": "A100", "v100": "V100",
                    "pcie-gen5": "H100", "pcie-gen4": "A100"}
"""The GPU model each ``--hardware`` profile name stands for (by prefix, the first that matches).  The two H100
SXM profiles are different parts: ``h100-nvswitch`` the 80 GB HBM3 one at 700 W (``NVIDIA H100 80GB HBM3``),
``h100-96gb-nvswitch`` the 96 GB HBM2e one at 500 W, with less memory bandwidth and another sustained clock, so
a profile measured on one does not price the other."""


def expected_gpu(hardware_name: str, hardware_kind: str = "gpu") -> str | None:
    """The device name fragment a profile for ``--hardware`` must carry ("H200"; "cpu" for a CPU profile)."""
    if hardware_kind != "gpu":
        return "cpu"
    base = hardware_name.split("+")[0].split(" ")[0].lower()
    return next((gpu for prefix, gpu in _GPU_OF_HARDWARE.items() if base.startswith(prefix)), None)


def check_hardware(profile: ComputeProfile, hardware_name: str, hardware_kind: str = "gpu",
                   arg: str = "--compute-profile") -> None:
    """Raise :class:`ProfileError` when ``profile`` was measured on another GPU than ``hardware_name`` names."""
    want = expected_gpu(hardware_name, hardware_kind)
    got = "cpu" if profile.cpu else profile.gpu
    if want is None or want.lower() not in got.lower().replace(" ", "") and want.lower() not in got.lower():
        raise ProfileError(f"{arg} {profile.source or '(profile)'}: measured on {got!r}, but --hardware "
                           f"{hardware_name} is {want or 'another device'}; measure this GPU with gpucomm measure "
                           f"--out FILE, or pass the --hardware the profile was measured on")


# --- lookup ----------------------------------------------------------------------------------------------------

def _ax(name: str, below: str = "extend", above: str = "hold") -> Axis:
    return Axis(name, below=below, above=above)


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 else f"{v:g}"


def layer_shape_of(row: dict[str, Any]) -> LayerShape:
    """The layer shape a profile row (a layer, kernels or step's ``layer`` dict) was measured at."""
    return LayerShape(**{k: row[k] for k in ("family", "hidden", "heads", "kv_heads", "ffn", "tp", "seq", "mb",
                                              "ac") if k in row})


def device_s(row: dict[str, Any], key: str) -> float:
    """A point's device time for its measured ``key`` (``fwd_s``, ``bwd_s``, ``gemm_fwd_s``, ...): the busy time
    of its kernels, ``busy_<key>``, where the profile has it (module docstring, **Device time**), else ``key``
    itself — the interval between CUDA events, which the host paces at small shapes.  Never more than ``key``:
    the device cannot be busy longer than the interval the same work took (module docstring)."""
    return min(float(row.get("busy_" + key, row[key])), float(row[key]))


BUSY_KEYS = {"layer": ("fwd_s", "bwd_s"), "kernels": ("gemm_fwd_s", "gemm_bwd_s"), "attention": ("fwd_s", "bwd_s")}
"""Per kind of point the lookups price the device from, its measured keys that carry a busy time."""


def busy_above(profile: ComputeProfile) -> dict[str, tuple[int, int]]:
    """Per kind of :data:`BUSY_KEYS`: how many of its points with busy times have one above its measured time
    (:func:`device_s` takes the measured time there), and how many have busy times.  Many such points say the
    two passes disagree: noise, or a GPU slower in the busy pass (module docstring, **Device time**)."""
    out = {}
    for kind, keys in BUSY_KEYS.items():
        rows = [r for r in profile.points.get(kind, []) if all(f"busy_{k}" in r for k in keys)]
        if rows:
            out[kind] = (sum(any(r[f"busy_{k}"] > r[k] for k in keys) for r in rows), len(rows))
    return out


HOST_PACED = 0.8
"""A layer inside whole steps is paced by the host when the device work the lookups price for it fills less than
this share of its marginal time.  In the first H200 profile (2026-12-04; busy times; the optimizer's share taken
out of the marginal; every whole step timed in one run) device-bound layers' priced device work is 0.89-1.05 of
their marginal time (``none`` and ``full`` steps at 16,384 tokens, and at 4,096 tokens from 1,536 wide, Llama
``none`` from 768), host-paced ones' 0.18-0.70 (every ``op`` step; ``full`` at 768 wide and Llama ``full`` at
1,536, GPT ``none`` at 768, 4,096 tokens).  Between the two, 0.8 leaves the lookups' own error out of the host's
time.  The shipped profile (r28, 2026-12-05, measured after this was set) reads 0.83-1.02 and 0.12-0.41: the
same split (GPT ``none`` at 768 wide, 4,096 tokens, moved to device-bound at 0.92)."""


@dataclass(frozen=True, slots=True)
class Scale:
    """How a derived profile scales measured times (:mod:`gpucomm.advisor.compute.derive`): compute-bound parts
    by ``compute``, memory-bound parts by ``memory`` (1, 1: as measured)."""

    compute: float = 1.0
    memory: float = 1.0

    def __call__(self, compute_s: float, memory_s: float) -> float:
        return compute_s * self.compute + memory_s * self.memory


PROBED_MODES = ("op",)
"""The checkpointing modes whose whole steps ``--host this`` times again (:meth:`ProfileSource.host_steps`);
every other mode's host time is scaled by its family's ``op`` reading.  Measured both ways on three H200 hosts
(gpu-logs-r20..r22_h200x1_2026-12-04): reading ``full`` and ``none`` from their own 768-wide steps as well
priced the thirteen cases at a worst |error| of 6.4%, 15.4% and 23.6%, the ``op`` reading alone 6.4%, 15.4% and
9.3% — on r22 the ``full`` steps read 1.70x the profile's host and gpt-650m-mb8 (full) ran device-bound at
108.5 ms as on fast hosts, predicted 134.2 ms from that reading and 113.1 ms from the op reading (1.43x)
(advisor-single-gpu-r22-opprobe_cpu_2026-12-04.txt).  A mode's small host-paced steps overstate its host
time inside larger steps on such hosts; the op reading's error is the smaller."""


class ProfileSource:
    """A compute source (:class:`gpucomm.advisor.compute.source.ComputeSource`) backed by a measured profile."""

    measured = True

    def __init__(self, profile: ComputeProfile, *, scale: Scale | None = None, label: str = "",
                 assumptions: list[str] | None = None,
                 host_scale: dict[tuple[str, str], float] | None = None,
                 probe_gpus: tuple[str, ...] = ()) -> None:
        self.profile = profile
        self.scale = scale or Scale()
        self.probe_gpus = (profile.gpu, *(g for g in probe_gpus if g != profile.gpu))
        """The GPUs (CUDA device names) on which ``--host this`` may time this source's host-paced steps: the
        profile's own, and for a derived source the GPU it prices (:mod:`gpucomm.advisor.compute.derive`)."""
        self.name = label or f"measured on {profile.gpu} ({profile.source or 'profile'})"
        self._assumptions = list(assumptions or [])
        self.host_scale = dict(host_scale or {})
        """Per (family, checkpointing mode): this host's time over the profile's host's (``--host this``); a mode
        not read takes its family's ``op`` reading (:meth:`host_ratio`), a family not read 1."""
        self._tables = _Tables(profile)

    def with_host(self, ratios: dict[tuple[str, str], float], line: str) -> ProfileSource:
        """This source with the host's time of each (family, checkpointing mode) scaled by ``ratios`` (``--host
        this``; :attr:`host_scale`), and ``line`` among its assumptions."""
        return ProfileSource(self.profile, scale=self.scale, label=self.name,
                             assumptions=[*self._assumptions, line], host_scale=ratios,
                             probe_gpus=self.probe_gpus)

    def host_ratio(self, family: str, ac: str) -> float:
        """This host's time over the profile's for layers of ``family`` with checkpointing ``ac``: the mode's own
        reading where the probe read it, else the family's ``op`` reading (an eager host's work scales with its
        CPU whatever the mode; priced better than each mode's own small steps, :data:`PROBED_MODES`), else 1."""
        return self.host_scale.get((family, ac), self.host_scale.get((family, "op"), 1.0))

    def host_points(self) -> dict[str, dict[str, Any]]:
        """Per family with a host time: the profile's ``op`` layer point at tp 1 with the least device work (the
        most host-paced), whose time on another machine's GPU of the same model says how that host compares."""
        by: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
        families = {fam for fam, _ in self._tables._host}
        for i, r in enumerate(self._tables.layers):
            s = layer_shape_of(r)
            if s.family in families and s.ac == "op" and s.tp == 1:
                by.setdefault(s.family, []).append((s.hidden * s.tokens, i, r))
        return {fam: min(rows)[2] for fam, rows in by.items()}

    def host_steps(self) -> dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any], float]]:
        """Per (family, checkpointing mode) whose host time comes from whole steps (:attr:`_Tables._step_host`):
        the two whole steps (fewest and most layers) of the shape with the least device work, and the host time
        a layer the profile prices (its median over shapes) — the quantity itself, which ``--host this``
        measures again on another machine (:func:`gpucomm.advisor.compute.measure.host_ratios`).

        Only the modes of :data:`PROBED_MODES` (``op``): the others take their family's ``op`` reading
        (:meth:`host_ratio`)."""
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for r in self._tables.steps:
            sh = layer_shape_of(r["layer"])
            if sh.tp == 1 and sh.ac in PROBED_MODES and (sh.family, sh.ac) in self._tables._step_host:
                groups.setdefault((tuple(sorted(r["layer"].items())), r["vocab"], r.get("loss", "upcast")),
                                  []).append(r)
        by: dict[tuple[str, str], list[tuple[int, tuple, list[dict[str, Any]]]]] = {}
        for key, rows in groups.items():
            if len({r["layers"] for r in rows}) >= 2:
                sh = layer_shape_of(rows[0]["layer"])
                by.setdefault((sh.family, sh.ac), []).append((sh.hidden * sh.tokens, key, rows))
        out = {}
        for mode, cands in sorted(by.items()):
            rows = min(cands)[2]
            a, b = min(rows, key=lambda r: r["layers"]), max(rows, key=lambda r: r["layers"])
            out[mode] = (a, b, self._tables._step_host[mode])
        return out

    # -- the interface -------------------------------------------------------------------------------------------

    def marginal_s(self, layer: dict[str, Any], vocab: int, a: tuple[int, float], b: tuple[int, float]) -> float:
        """A layer's marginal time between two whole steps of the profile's ``layer`` row measured as ``(layers,
        seconds)`` — as the profile prices its own (the optimizer step over the extra layers taken out):
        ``--host this`` reads this host's the same way (:func:`gpucomm.advisor.compute.measure.host_ratios`)."""
        return self._tables.marginal(layer_shape_of(layer), vocab, a, b)

    def parts(self, job, layout) -> ComputeParts:
        """One micro-batch of ``layout`` (module docstring, **Lookup**)."""
        arch, software = job.arch, job.software
        self._check_job(job, software)
        tp, cp = layout.tp, layout.cp
        seq = job.seq // cp
        shape = LayerShape(family=family_of(arch), hidden=arch.hidden, heads=arch.heads, kv_heads=arch.kv_heads,
                           ffn=arch.ffn_hidden, tp=tp, seq=seq, mb=layout.mb, ac=layout.ac)
        per_stage = math.ceil(arch.layers / layout.pp)
        notes: list[str] = []
        lay = self._tables.layer(shape, cp, software, notes)
        loss = "autocast" if job.loss in ("autocast", "fused") else "upcast"
        vocab = max(1, arch.vocab // tp)
        head_c, head_m = self._tables.head(HeadShape(family=shape.family, vocab=vocab, hidden=arch.hidden,
                                                     seq=seq, mb=layout.mb, loss=loss), notes)
        emb = self._tables.embedding(EmbeddingShape(vocab=vocab, hidden=arch.hidden, seq=seq, mb=layout.mb,
                                                    positions=arch.learned_positions), notes)
        own = self._tables.residual(shape, notes) if software != "fused" else 0.0
        sc = self.scale
        t_layer = sc(lay.compute_s, lay.memory_s) * self._tables.in_step(shape)
        host = self._tables.host_s(shape, software, notes) * self.host_ratio(shape.family, shape.ac)
        # the host's time: not scaled by a derived profile's GPU, only by --host this
        t_head = sc(head_c, head_m)
        t_emb = sc(0.0, emb) + own  # the step's own work (host) is not scaled; it runs on the first stage
        t_mb = per_stage * t_layer + t_head + t_emb
        peak = job.profile.peak_flops(job.dtype) if hasattr(job.profile, "peak_flops") else None
        eff = shape.gemm_flops() / (t_layer * peak) if peak and t_layer > 0 else 0.0
        return ComputeParts(t_mb=t_mb, t_head=t_head, t_embedding=t_emb, gemm_fwd_s=sc(lay.gemm_fwd_s, 0.0),
                            attn_fwd_s=sc(lay.attn_fwd_s, 0.0), per_stage=per_stage,
                            loss_s=sc(0.0, head_m), efficiency=eff, extrapolated=tuple(dict.fromkeys(notes)),
                            host_layer_s=host)

    def optimizer_s(self, job, params: float) -> Lookup:
        """Fused AdamW over ``params`` parameters: seconds per parameter interpolated over the parameter count."""
        value, notes = self._tables.optimizer(params)
        return Lookup(value=self.scale(0.0, value), extrapolated=notes)

    def margin_bytes(self, job, layout) -> Lookup | None:
        """The caching allocator's reserved bytes beyond allocated at the step's peak (module docstring)."""
        arch = job.arch
        shape = LayerShape(family=family_of(arch), hidden=arch.hidden, heads=arch.heads, kv_heads=arch.kv_heads,
                           ffn=arch.ffn_hidden, tp=layout.tp, seq=job.seq // layout.cp, mb=layout.mb)
        return self._tables.margin(shape, max(1, arch.vocab // layout.tp))

    def assumptions(self, job) -> list[str]:
        p = self.profile
        clock = p.device.get("sm_clock_sustained_mhz")
        power = p.device.get("power_limit_w")
        where = (f"compute measured on {p.gpu}"
                 + (f" at {power:g} W" if power else "") + (f", SM clock {clock:g} MHz under load" if clock else "")
                 + f" ({p.software} PyTorch {p.env.get('versions', {}).get('torch', '?')}, {p.precision}; "
                 f"{p.source or 'profile'})")
        lines = [where, *self._assumptions]
        if job.software == "fused":
            lines.append("--software fused: the layer's matmuls and attention as measured alone plus fused "
                         f"elementwise traffic ({datasheet.EW_PASSES:g} passes over the stored activations) at the "
                         f"measured copy bandwidth {p.device.get('copy_gbps', 0):,.0f} GB/s; derived, not measured")
        if job.loss == "fused":
            lines.append(f"--loss {job.loss}: timed as cross-entropy on bf16 logits under autocast (the closest "
                         "loss the profile measures)")
        return lines

    # -- checks ----------------------------------------------------------------------------------------------------

    def check(self, job) -> None:
        """Raise :class:`ProfileError` for a software or compute dtype this profile did not measure."""
        self._check_job(job, job.software)

    def _check_job(self, job, software: str) -> None:
        p = self.profile
        if software not in SOFTWARE:
            raise ProfileError(f"--software {software!r}: expected one of {'|'.join(SOFTWARE)}")
        want = "eager" if software == "fused" else software
        if p.software != want:
            raise ProfileError(f"--software {software}: the compute profile {p.source or ''} measured "
                               f"{p.software}; measure one with gpucomm measure --software {want} --out FILE and "
                               f"pass it, or ask for --software {p.software}")
        compute = job.dtype
        if (compute == "fp32") != (p.precision == "fp32"):
            raise ProfileError(f"--dtype {compute}: the compute profile {p.source or ''} measured {p.precision}; "
                               f"measure with gpucomm measure --precision {compute}, or pass --dtype {p.precision}")


def _ew_bytes(shape: LayerShape) -> float:
    """The bytes of activations one layer of ``shape`` stores for its backward at ``ac=none`` (eager PyTorch,
    autocast's fp32 residual stream; :func:`gpucomm.advisor.memory.activation_terms`), on one GPU of ``tp``: what
    its elementwise work reads and writes scales with, across MLP widths and KV-head counts that differ from the
    profile's (the matmuls' FLOPs do not: a narrower MLP or fewer KV heads cut FLOPs, not norms or casts)."""
    from gpucomm.models import Architecture

    arch = Architecture(name="q", layers=1, hidden=shape.hidden, heads=shape.heads, kv_heads=shape.kv_heads,
                        ffn_hidden=shape.ffn, ffn_kind="swiglu" if shape.family == "llama" else "gelu-4h",
                        vocab=1, seq=shape.seq, tied_embeddings=False)
    per = sum(activation_terms(arch, "none", residual_bytes=4.0, eager=True).values())
    return per * shape.hidden / shape.tp * shape.tokens


def _step_params(s: LayerShape, vocab: int, layers: int) -> int:
    """The parameters of a profile's whole step (``modules.Stack``): its layers' matmuls and norms, the embedding
    and, for Llama, an untied head."""
    return layers * (s.mm_params() + 4 * s.hidden) + vocab * s.hidden * (1 if s.family == "gpt" else 2)


@dataclass(frozen=True, slots=True)
class _Layer:
    compute_s: float
    memory_s: float
    gemm_fwd_s: float
    attn_fwd_s: float


class _Tables:
    """The profile's points, normalised once, and the lookups over them."""

    def __init__(self, profile: ComputeProfile) -> None:
        self.p = profile
        pts = profile.points
        self.attention = pts.get("attention", [])
        self.layers = pts.get("layer", [])
        self.kernels = pts.get("kernels", [])
        self.embeddings = pts.get("embedding", [])
        self.heads = pts.get("head", [])
        self.optimizers = pts.get("optimizer", [])
        self.steps = pts.get("step", [])
        self.copy_bw = float(profile.device.get("copy_gbps") or 0.0) * 1e9

    def _missing(self, what: str, fix: str) -> ProfileError:
        return ProfileError(f"--compute-profile {self.p.source or '(profile)'}: no {what} measured, and nothing to "
                            f"extrapolate from; {fix}")

    # attention: log(seconds per FLOP) over head dim, sequence, rows
    def attention_s(self, a: AttentionShape, notes: list[str]) -> tuple[float, float]:
        if not self.attention:
            raise self._missing("attention", "measure with gpucomm measure (every grid has attention points)")
        axes = [_ax("head dim", below="hold"), _ax("seq"), _ax("rows (mb x heads)")]
        out = []
        for key in ("fwd_s", "bwd_s"):
            pts = [((r["head_dim"], r["seq"], r["mb"] * r["heads"]),
                    math.log(max(device_s(r, key), 1e-12) / AttentionShape(head_dim=r["head_dim"], heads=r["heads"],
                                                                 seq=r["seq"], mb=r["mb"]).fwd_flops()))
                   for r in self.attention]
            v, n = nested(pts, axes, (a.head_dim, a.seq, a.rows), "attention", _fmt)
            notes.extend(n)
            out.append(math.exp(v) * a.fwd_flops())
        return out[0], out[1]

    def _measured_attention(self, shape: LayerShape) -> tuple[float, float]:
        return self.attention_s(shape.attention(), [])

    # layers: the rest per matmul FLOP, ac=none
    @functools.cached_property
    def _rest(self) -> dict[str, list]:
        by: dict[str, list] = {}
        for r in self.layers:
            s = layer_shape_of(r)
            if s.ac != "none":
                continue
            af, ab = self._measured_attention(s)
            fwd = device_s(r, "fwd_s")
            total = fwd + device_s(r, "bwd_s")
            rest = max(total - af - ab, 0.1 * total)  # attention alone can run slower than inside the layer
            fwd_share = min(1.0, max(0.0, (fwd - af) / rest))
            by.setdefault(s.family, []).append(((s.tp, s.hidden, s.tokens), math.log(rest / s.gemm_flops()),
                                                fwd_share))
        return by

    @functools.cached_property
    def _host(self) -> dict[tuple[str, str], float]:
        """Per (family, checkpointing mode): the host's time to issue one layer's forward and backward — from
        whole steps at two layer counts where the profile has them for the (family, mode) (:attr:`_step_host`;
        none of them host-paced: absent, the device outlasts the host), else the median measured time of the
        isolated layer points that are host-bound, whose device work (the ``ac=none`` layer at that shape plus
        what the mode reruns) fills less than half of it (module docstring, **Host**).  Isolated points
        overstate a layer's host time in a step (each times its own forward and backward call): in the first
        H200 profile (2026-12-04) an isolated GPT ``none`` layer 768 wide at 4,096 tokens took 2.59 ms for 0.92 ms of busy
        device time, and the same layer inside whole steps 1.30 ms."""
        by: dict[tuple[str, str], list[float]] = {}
        stepped = {(s.family, s.ac) for s, _, _ in self._marginals}
        for r in self.layers:
            s = layer_shape_of(r)
            wall = r["fwd_s"] + r["bwd_s"]
            if (s.family, s.ac) not in stepped and self._host_bound(s, wall):
                by.setdefault((s.family, s.ac), []).append(wall)
        isolated = {k: statistics.median(v) for k, v in by.items()}
        return {**isolated, **self._step_host}

    def _host_bound(self, s: LayerShape, wall: float) -> bool:
        """Whether the device work the lookups price for one isolated layer point of ``s`` fills less than half of
        ``wall`` (the point's own iteration's fixed host work aside; a layer inside steps: :data:`HOST_PACED`)."""
        try:
            lay = self.layer(s, 1, "eager", [])
        except (ProfileError, GridError):
            return False
        return lay.compute_s + lay.memory_s < 0.5 * wall

    @functools.cached_property
    def _step_host(self) -> dict[tuple[str, str], float]:
        """Per (family, checkpointing mode): a layer's host time inside whole steps — the marginal time of a
        layer between two measured steps of the same shape with different layer counts, ``(t_b - t_a) / (n_b -
        n_a)``, where the layer is host-paced there — the marginal time exceeds the device work the lookups
        price for the layer, so the difference is the host's (a layer cannot take less than its host time in a
        step, so the marginal is also an upper bound of it); the median over shapes.  The fixed parts
        (embedding, head, loss, optimizer, the step's own work) cancel in the difference.  Where a profile has
        such steps they replace the isolated points' host time, which overstates it: on the H200 two
        host-bound ``op`` cases were predicted 16-22% slow at layers x the isolated time
        (advisor-single-gpu-r2_h200x1_2026-12-04.txt).  The test is :data:`HOST_PACED`, not the isolated
        points' ``device < marginal / 2``: the first H200 profile's op steps then ran 5.6-15.2 ms a layer over 3.1-6.2 ms
        of device work (0.39-0.55 of it), host-paced but above the half, and the half rule dropped them for the
        isolated points' time (gpt-1.3b op predicted 27% slow in advisor-single-gpu-r3_h200x1_2026-12-04.txt)."""
        by: dict[tuple[str, str], list[float]] = {}
        for s, marginal, device in self._marginals:
            if device < HOST_PACED * marginal:
                by.setdefault((s.family, s.ac), []).append(marginal)
        return {k: statistics.median(v) for k, v in by.items()}

    @functools.cached_property
    def _marginals(self) -> list[tuple[LayerShape, float, float]]:
        """(shape, marginal, device) for each shape whose whole steps were measured at two or more layer counts
        (with the same vocabulary and loss): a layer's marginal time between the fewest and the most layers,
        ``(t_b - t_a - (opt_b - opt_a)) / (n_b - n_a)`` — the fixed parts cancel, and the optimizer step's time
        over the extra layers' parameters (:meth:`optimizer`, priced once a step for every parameter) is taken
        out, so that it is not counted again inside every layer — and the device work the lookups price for the
        layer; shapes the lookups cannot price are left out.  Read by :attr:`_step_host` and :attr:`_in_step`.
        Without taking the optimizer out, fused AdamW over one 3,072-wide GPT layer (113 M parameters, ~0.8 ms
        on the H200) read as 13% of that layer's marginal at 4,096 tokens and 3-4% at 16,384."""
        groups: dict[tuple, list[tuple[int, float]]] = {}
        for r in self.steps:
            key = (tuple(sorted(r["layer"].items())), r["vocab"], r.get("loss", "upcast"))
            groups.setdefault(key, []).append((r["layers"], r["seconds"]))
        out = []
        for (layer, vocab, _), pts in groups.items():
            a, b = min(pts), max(pts)
            if b[0] == a[0]:
                continue
            s = layer_shape_of(dict(layer))
            try:
                lay = self.layer(s, 1, "eager", [])
                marginal = self.marginal(s, vocab, a, b)
            except (ProfileError, GridError):
                continue
            out.append((s, marginal, lay.compute_s + lay.memory_s))
        return out

    def marginal(self, s: LayerShape, vocab: int, a: tuple[int, float], b: tuple[int, float]) -> float:
        """A layer's marginal time between two whole steps of ``s`` measured as ``(layers, seconds)`` ``a`` and
        ``b``: their difference a layer, the optimizer step over the extra layers' parameters taken out
        (:attr:`_marginals`)."""
        (na, ta), (nb, tb) = a, b
        opt = [self.optimizer(_step_params(s, vocab, n))[0] for n in (na, nb)]
        return (tb - ta - (opt[1] - opt[0])) / (nb - na)

    @functools.cached_property
    def _gemm(self) -> dict[str, list]:
        """Matmuls replayed alone, per matmul FLOP: log(seconds / FLOP), and the forward's share."""
        by: dict[str, list] = {}
        for r in self.kernels:
            s = layer_shape_of({**r, "ac": "none"})
            fwd = device_s(r, "gemm_fwd_s")
            total = fwd + device_s(r, "gemm_bwd_s")
            if total <= 0:
                continue
            by.setdefault(s.family, []).append(((s.tp, s.hidden, s.tokens), math.log(total / s.gemm_flops()),
                                                fwd / total))
        return by

    @functools.cached_property
    def _elementwise(self) -> dict[str, list]:
        """Per family: a layer's time beyond its attention and its matmuls replayed alone (norms, activations,
        rotary, casts, residual adds, launch gaps) per byte of the activations it stores (:func:`_ew_bytes`):
        log(seconds / byte), and the forward's share; from the ``ac=none`` layer points that have their
        matmuls measured alone (module docstring, **Lookup**)."""
        mm = {layer_shape_of({**r, "ac": "none"}): device_s(r, "gemm_fwd_s") + device_s(r, "gemm_bwd_s")
              for r in self.kernels}
        mm_fwd = {layer_shape_of({**r, "ac": "none"}): device_s(r, "gemm_fwd_s") for r in self.kernels}
        by: dict[str, list] = {}
        for r in self.layers:
            s = layer_shape_of(r)
            if s.ac != "none" or s not in mm:
                continue
            af, ab = self._measured_attention(s)
            fwd = device_s(r, "fwd_s")
            total = fwd + device_s(r, "bwd_s")
            other = max(total - af - ab - mm[s], 0.05 * total)  # alone, attention and matmuls can run slower
            fwd_share = min(1.0, max(0.0, (fwd - af - mm_fwd[s]) / other))
            by.setdefault(s.family, []).append(((s.tp, s.hidden, s.tokens), math.log(other / _ew_bytes(s)),
                                                fwd_share))
        return by

    def layer(self, shape: LayerShape, cp: int, software: str, notes: list[str]) -> _Layer:
        rest_pts = self._rest.get(shape.family)
        if not rest_pts:
            raise self._missing(f"{shape.family} layers", f"measure them: gpucomm measure --arch ... "
                                f"ffn_kind={'swiglu' if shape.family == 'llama' else 'gelu-4h'} --out FILE")
        axes = [_ax("tp", below="hold"), _ax("hidden"), _ax("tokens")]
        q = (shape.tp, shape.hidden, shape.tokens)
        what = f"{shape.family} layer"
        log_rest, n = nested([(c, v) for c, v, _ in rest_pts], axes, q, what, _fmt)
        notes.extend(n)
        rest = math.exp(log_rest) * shape.gemm_flops()
        fwd_share, _ = nested([(c, f) for c, _, f in rest_pts], axes, q, what, _fmt)
        af, ab = self.attention_s(shape.attention(), notes)
        af, ab = cp * af, cp * ab  # ring attention: this GPU's queries meet every key of the sequence
        gemm_pts = self._gemm.get(shape.family)
        ew_pts = self._elementwise.get(shape.family)
        if gemm_pts:
            log_g, n = nested([(c, v) for c, v, _ in gemm_pts], axes, q, f"{shape.family} matmuls", _fmt)
            notes.extend(n)
            gemm = math.exp(log_g) * shape.gemm_flops()
            g_fwd, _ = nested([(c, f) for c, _, f in gemm_pts], axes, q, f"{shape.family} matmuls", _fmt)
        else:  # no replayed matmuls: the rest is an upper bound of the GEMM time
            gemm, g_fwd = rest, 1.0 / 3.0
        if gemm_pts and ew_pts:  # matmuls per FLOP, the rest per byte of activations (module docstring, Lookup)
            log_e, _ = nested([(c, v) for c, v, _ in ew_pts], axes, q, what, _fmt)
            other = math.exp(log_e) * _ew_bytes(shape)
            e_fwd, _ = nested([(c, f) for c, _, f in ew_pts], axes, q, what, _fmt)
            ew_fwd = e_fwd * other  # the forward's norms, activations, casts
        else:  # the rest per matmul FLOP, the matmuls inside it
            gemm = min(rest, gemm)
            other = rest - gemm
            ew_fwd = max(0.0, fwd_share * rest - gemm * g_fwd)
        if software == "fused":
            fused = min(other, self._fused_elementwise(shape))
            ew_fwd *= fused / other if other > 0 else 0.0
            other = fused
        redo = self.recompute_s(shape, ew_fwd, gemm * g_fwd, af)
        # compute-bound: matmuls and attention; memory-bound: the rest (recomputation split the same way)
        compute = gemm + af + ab
        ew_redo = ew_fwd if shape.recomputes_elementwise() else 0.0
        return _Layer(compute_s=compute + redo - ew_redo, memory_s=other + ew_redo, gemm_fwd_s=gemm * g_fwd,
                      attn_fwd_s=af)

    def host_s(self, shape: LayerShape, software: str, notes: list[str]) -> float:
        """One layer's host time (:attr:`_host`); 0 for ``fused`` (not eager PyTorch's host) or where the profile
        has no host-bound point of the (family, mode)."""
        if software == "fused":
            return 0.0
        h = self._host.get((shape.family, shape.ac))
        if h is None and shape.ac != "none" and (shape.family, shape.ac) not in self._modes:
            notes.append(f"{shape.family} layers with ac={shape.ac}: no point measured; the host's time is left "
                         "out")
            return 0.0
        return h or 0.0  # points of the mode measured and none host-paced: the device outlasts the host

    @functools.cached_property
    def _modes(self) -> set[tuple[str, str]]:
        """(family, checkpointing mode) of every measured layer point."""
        return {(sh.family, sh.ac) for sh in map(layer_shape_of, self.layers)}

    @staticmethod
    def recompute_s(shape: LayerShape, ew_fwd: float, gemm_fwd: float, attn_fwd: float) -> float:
        """Seconds the checkpointing mode adds to one layer's backward: the forward work it reruns
        (:meth:`LayerShape.recomputed_mm_share` of the forward matmuls, the elementwise forward for ``full`` and
        ``op``, attention's forward for ``full`` and ``selective``), at the rates the layer ran them."""
        return (gemm_fwd * shape.recomputed_mm_share() + (ew_fwd if shape.recomputes_elementwise() else 0.0)
                + (attn_fwd if shape.recomputes_attention() else 0.0))

    def _fused_elementwise(self, shape: LayerShape) -> float:
        """Fused kernels' memory-bound traffic of one layer at the measured copy bandwidth (module docstring)."""
        from gpucomm.models import Architecture

        arch = Architecture(name="q", layers=1, hidden=shape.hidden, heads=shape.heads, kv_heads=shape.kv_heads,
                            ffn_hidden=shape.ffn, ffn_kind="swiglu" if shape.family == "llama" else "gelu-4h",
                            vocab=1, seq=shape.seq, tied_embeddings=False)
        stored = sum(activation_terms(arch, "none").values())
        bw = self.copy_bw or 1e12
        return datasheet.EW_PASSES * stored * shape.hidden / shape.tp * shape.tokens / bw

    def head(self, h: HeadShape, notes: list[str]) -> tuple[float, float]:
        """(compute-bound, memory-bound) seconds of the head and its loss: seconds per FLOP over the vocabulary
        on this GPU, hidden and tokens, from the points of the same loss and family (else the nearest measured)."""
        rows = [r for r in self.heads if r["loss"] == h.loss] or self.heads
        if not rows:
            raise self._missing("head and loss", "measure with gpucomm measure (every grid has head points)")
        if rows is self.heads and h.loss not in {r["loss"] for r in rows}:
            notes.append(f"head: loss {h.loss} not measured; timed as {rows[0]['loss']}")
        same = [r for r in rows if r["family"] == h.family]
        if not same:
            notes.append(f"head: no {h.family} head measured; timed as {rows[0]['family']}'s")
        pts = [((r["vocab"], r["hidden"], r["seq"] * r["mb"]), math.log(r["seconds"] / HeadShape(
            family=r["family"], vocab=r["vocab"], hidden=r["hidden"], seq=r["seq"], mb=r["mb"]).flops()))
            for r in same or rows]
        v, n = nested(pts, [_ax("vocab", "hold"), _ax("hidden"), _ax("tokens")], (h.vocab, h.hidden, h.tokens),
                      f"head ({h.loss} loss)", _fmt)
        notes.extend(n)
        total = math.exp(v) * h.flops()
        memory = min(total, datasheet.LOSS_BYTES_PER_LOGIT * h.vocab * h.tokens / (self.copy_bw or 1e12))
        return total - memory, memory

    def embedding(self, e: EmbeddingShape, notes: list[str]) -> float:
        if not self.embeddings:
            raise self._missing("embedding", "measure with gpucomm measure (every grid has embedding points)")
        pts = [((r["vocab"] * r["hidden"], r["seq"] * r["mb"]),
                math.log(r["seconds"] / EmbeddingShape(vocab=r["vocab"], hidden=r["hidden"], seq=r["seq"],
                                                       mb=r["mb"]).nbytes())) for r in self.embeddings]
        v, n = nested(pts, [_ax("vocab x hidden"), _ax("tokens")], (e.vocab * e.hidden, e.tokens), "embedding",
                      _fmt)
        notes.extend(n)
        return math.exp(v) * e.nbytes()

    def optimizer(self, params: float) -> tuple[float, tuple[str, ...]]:
        if not self.optimizers:
            raise self._missing("optimizer step", "measure with gpucomm measure (every grid has optimizer points)")
        pts = [((r["params"],), math.log(r["seconds"] / r["params"])) for r in self.optimizers]
        v, notes = nested(pts, [_ax("parameters")], (max(1.0, params),), "optimizer", _fmt)
        return math.exp(v) * params, notes

    @functools.cached_property
    def _steps(self) -> dict[str, list]:
        """Per family: (hidden, tokens) -> (own seconds beyond the parts, margin bytes per fp32 logit byte)."""
        by: dict[str, list] = {}
        for r in self.steps:
            s = layer_shape_of(r["layer"])
            if s.ac == "op" or r["layers"] != 2:  # op steps measure the host (_step_host); more layers, a
                continue                         # layer inside a step (_marginals)
            margin = max(0.0, r["peak_reserved_bytes"] - r["peak_allocated_bytes"]) / (4.0 * s.tokens * r["vocab"])
            own = None
            if s.ac == "none" and s.tp == 1 and r.get("loss", "upcast") == "upcast":
                try:
                    parts = self._step_parts(s, r)
                    own = r["seconds"] - parts
                except (ProfileError, GridError):
                    own = None
            by.setdefault(s.family, []).append(((s.hidden, s.tokens), own, margin))
        return by

    def _step_parts(self, s: LayerShape, r: dict[str, Any]) -> float:
        notes: list[str] = []
        lay = self.layer(s, 1, "eager", notes)
        c, m = self.head(HeadShape(family=s.family, vocab=r["vocab"], hidden=s.hidden, seq=s.seq, mb=s.mb,
                                   loss=r.get("loss", "upcast")), notes)
        emb = self.embedding(EmbeddingShape(vocab=r["vocab"], hidden=s.hidden, seq=s.seq, mb=s.mb,
                                            positions=s.family == "gpt"), notes)
        opt, _ = self.optimizer(_step_params(s, r["vocab"], r["layers"]))
        host = self.host_s(s, "eager", notes)
        layer = (lay.compute_s + lay.memory_s) * self.in_step(s)
        return max(r["layers"] * layer + c + m + emb + opt, r["layers"] * host)

    @functools.cached_property
    def _in_step(self) -> dict[tuple[str, str], list]:
        """Per (family, ``none`` or ``full``): a layer's marginal time inside whole steps of one shape at two layer
        counts over the device work the lookups price for it — log of the ratio, over (hidden, tokens) — where
        the layer is device-bound there (module docstring, **Lookup**)."""
        by: dict[tuple[str, str], list] = {}
        for s, marginal, device in self._marginals:
            if s.ac in ("none", "full") and s.tp == 1 and device >= HOST_PACED * marginal:  # not the host's
                by.setdefault((s.family, s.ac), []).append(((s.hidden, s.tokens), math.log(marginal / device)))
        return by

    def in_step(self, shape: LayerShape) -> float:
        """How much slower a layer of ``shape`` runs inside a whole training step than its lookups price it
        (:attr:`_in_step`; ``full`` checkpointing as measured for ``full``, every other mode as ``none``); 1
        where the profile has no whole steps at two layer counts."""
        pts = self._in_step.get((shape.family, "full" if shape.ac == "full" else "none"))
        if not pts:
            return 1.0
        v, _ = nested(pts, [_ax("hidden", "hold"), _ax("tokens", "hold")], (shape.hidden, shape.tokens),
                      f"{shape.family} layer inside a step", _fmt)
        return math.exp(v)

    def residual(self, shape: LayerShape, notes: list[str]) -> float:
        pts = [(c, own) for c, own, _ in self._steps.get(shape.family, []) if own is not None]
        if not pts:
            notes.append(f"{shape.family}: no whole steps measured; the step's own work is left out")
            return 0.0
        v, n = nested(pts, [_ax("hidden", "hold"), _ax("tokens", "hold")], (shape.hidden, shape.tokens),
                      f"{shape.family} step's own work", _fmt)
        notes.extend(n)
        return max(0.0, v)  # a time: a step cannot take less than its parts (extrapolation can say so)

    def margin(self, shape: LayerShape, vocab: int) -> Lookup | None:
        pts = [(c, m) for c, _, m in self._steps.get(shape.family, [])]
        if not pts:
            return None
        v, n = nested(pts, [_ax("hidden", "hold"), _ax("tokens", "hold")], (shape.hidden, shape.tokens),
                      f"{shape.family} allocator margin", _fmt)
        return Lookup(value=max(0.0, v) * 4.0 * shape.tokens * vocab, extrapolated=n)

