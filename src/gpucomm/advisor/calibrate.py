"""Calibration: fit the cost model's constants from ``gpucomm bench`` and ``gpucomm train`` records.

Measured values override datasheet ones (STYLE.md 13; cost-model.md §6.5: "calibration is mandatory").

* **Collectives.** For each (op, participant count n, scope) the bench rows are split into size bands
  (:data:`BANDS`: small < 64 KiB <= medium < 8 MiB <= large, because NCCL switches protocol and algorithm
  by size, cost-model.md §1.2) and ``t = alpha + beta * S`` is fitted in each band with at least two sizes,
  plus one fit over all sizes as a fallback.  The fit is least squares in time with relative residuals
  (``sum(((alpha + beta S) - t) / t)^2``), so a 4 KiB point counts as much as a 1 GiB one.  ``scope`` is
  "process" for multi-process backends (DDP, ZeRO) and "local" for one-process ones (replicated, dp).
  From the largest-n all_reduce fit a link is derived (``B = 2(n-1)/n / beta``, per-step
  ``alpha / 2(n-1)``) for participant counts that were not measured.
* **Compute.** ``single`` train rows give the step time as ``c0 + c1 * samples`` per model (a least-squares
  line through the rows' global batches, slope kept >= 0; through the origin when only one batch was run).
  Below the smallest measured batch the step is at least that batch's time scaled by samples (a line
  with a negative intercept must not predict a near-free step) and an achieved FLOP/s
  (``6 Psi tokens / step``) for models that were not run.
* **Per-device costs and slowdown.** Multi-device rows of each strategy give, after subtracting the
  model's prediction without them, ``residual = a * n + s * compute`` (:func:`fit_overheads`): a per-device
  cost in seconds (DataParallel's GIL/replication cost; our threads' cost) and a compute slowdown
  (communication kernels or processes competing with compute), both >= 0.

A calibrated profile is a :class:`~gpucomm.advisor.hardware.HardwareProfile` whose ``calibration`` dict
holds these fits; :func:`save_profile` / :func:`load_profile` write and read it as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gpucomm.advisor import cost, hardware, plan
from gpucomm.advisor.fits import CollectiveFit, collective_fit
from gpucomm.advisor.hardware import HardwareProfile, Link

__all__ = ["BANDS", "CalibrationError", "CollectiveFit", "calibrate", "collective_fit", "fit_alpha_beta",
           "fit_collectives", "fit_compute", "fit_overheads", "load_profile", "save_profile"]

KiB, MiB = 2**10, 2**20
BANDS: tuple[tuple[str, int, float], ...] = (("small", 0, 64 * KiB), ("medium", 64 * KiB, 8 * MiB),
                                             ("large", 8 * MiB, math.inf))
_ALL = ("all", 0, math.inf)
_GPU_NAMES = (("H200", "h200-nvswitch"), ("H100", "h100-nvswitch"), ("A100", "a100-nvlink3"))


class CalibrationError(ValueError):
    """Records that cannot calibrate anything (none usable, or a fit that is not physical)."""


def fit_alpha_beta(sizes: Sequence[float], times_us: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``(alpha_us, beta_us_per_byte)`` with relative residuals; needs two distinct sizes.

    Minimises ``sum(((alpha + beta S_i) - t_i) / t_i)^2``: the normal equations of the 2x2 system with
    weights ``1/t_i^2``.  alpha is clamped at 0 (a negative latency is a fit artefact of noisy small sizes).
    """
    if len(sizes) != len(times_us) or len(set(sizes)) < 2:
        raise CalibrationError(f"fit_alpha_beta: need >= 2 distinct sizes, got sizes={list(sizes)!r}")
    if any(t <= 0 for t in times_us):
        raise CalibrationError(f"fit_alpha_beta: times must be > 0, got {list(times_us)!r}")
    w = [1.0 / (t * t) for t in times_us]
    s_w = sum(w)
    s_x = sum(wi * x for wi, x in zip(w, sizes, strict=True))
    s_xx = sum(wi * x * x for wi, x in zip(w, sizes, strict=True))
    s_y = sum(wi * y for wi, y in zip(w, times_us, strict=True))
    s_xy = sum(wi * x * y for wi, x, y in zip(w, sizes, times_us, strict=True))
    det = s_w * s_xx - s_x * s_x
    alpha = (s_xx * s_y - s_x * s_xy) / det
    beta = (s_w * s_xy - s_x * s_y) / det
    if alpha < 0:  # refit through the origin
        alpha = 0.0
        beta = s_xy / s_xx
    return alpha, beta


def _scope(rec: Any) -> str:
    """"process" for a multi-process measurement (a "group" backend: one participant per rank), else "local"."""
    from gpucomm.bench.backends import BACKENDS  # the backend's own attribute, not a list of names typed here

    backend = BACKENDS.get(rec.backend)
    return "process" if rec.world_size > 1 or (backend is not None and backend.scope == "group") else "local"


def _fit_group(op: str, n: int, scope: str, rows: list[tuple[float, float]]) -> list[CollectiveFit]:
    fits = []
    for band, lo, hi in (*BANDS, _ALL):
        pts = sorted((s, t) for s, t in rows if lo <= s < hi)
        if len({s for s, _ in pts}) < 2:
            continue
        sizes, times = zip(*pts, strict=True)
        a, b = fit_alpha_beta(sizes, times)
        err = max(abs(a + b * s - t) / t for s, t in pts)
        fits.append(CollectiveFit(op=op, n=n, scope=scope, band=band, lo=lo, hi=hi, alpha_us=a,
                                  beta_us_per_byte=b, points=len(pts), max_rel_err=err))
    return fits


def fit_collectives(bench: Iterable[Any]) -> list[CollectiveFit]:
    """Fits for every (op, n, scope) in ``bench`` rows that were measured correctly (``wrong <= 0``).

    Where several backends measured the same (op, n, scope), the faster median per size is kept: the
    model predicts what the best available implementation does.
    """
    best: dict[tuple[str, int, str], dict[int, float]] = defaultdict(dict)
    for r in bench:
        if r.wrong > 0 or r.n < 2 or r.time_us_median <= 0:
            continue
        key = (r.op, r.n, _scope(r))
        prev = best[key].get(r.size)
        best[key][r.size] = r.time_us_median if prev is None else min(prev, r.time_us_median)
    fits: list[CollectiveFit] = []
    for (op, n, scope), by_size in sorted(best.items()):
        fits += _fit_group(op, n, scope, list(by_size.items()))
    return fits


def derived_link(fits: Sequence[CollectiveFit], scope: str = "process") -> Link | None:
    """A link from the largest-n all_reduce fit: ``B = 2(n-1)/n / beta``, alpha per ring step."""
    cands = [f for f in fits if f.op == "all_reduce" and f.band in ("all", "large") and f.beta_us_per_byte > 0]
    if not cands:
        return None
    cands.sort(key=lambda f: (f.scope == scope, f.n, f.band == "large"))
    big = cands[-1]
    small = [f for f in fits if f.op == "all_reduce" and f.n == big.n and f.scope == big.scope]
    alpha = min(f.alpha_us for f in small) / (2 * (big.n - 1))
    bw = 2 * (big.n - 1) / big.n / (big.beta_us_per_byte * 1e-6) / 1e9
    return Link(name=f"calibrated-{big.scope}", bandwidth_gbps=bw, alpha_us=alpha,
                source=f"fitted from all_reduce at n={big.n} ({big.points} sizes, {big.scope} scope)")


def fit_compute(train: Iterable[Any]) -> dict[str, Any]:
    """Per-model ``step_s = c0 + c1 * samples`` from ``single`` rows, and the median achieved FLOP/s."""
    by_model: dict[str, list[Any]] = defaultdict(list)
    for r in train:
        if r.strategy == "single" and r.status == "ok" and r.step_ms_median:
            by_model[r.model].append(r)
    models, flops = {}, []
    for model, rows in by_model.items():
        pts = {r.global_batch: r.step_ms_median * 1e-3 for r in rows}
        if len(pts) >= 2:
            b, s = zip(*sorted(pts.items()), strict=True)
            mb, ms = statistics.fmean(b), statistics.fmean(s)
            c1 = sum((x - mb) * (y - ms) for x, y in zip(b, s, strict=True)) / sum((x - mb) ** 2 for x in b)
            c0 = ms - c1 * mb
            if c1 < 0:  # noise larger than the per-sample cost: no measurable slope
                c0, c1 = ms, 0.0
        else:
            ((gb, st),) = pts.items()
            c0, c1 = 0.0, st / gb
        b_min = min(pts)
        models[model] = {"c0_s": c0, "c1_s_per_sample": c1, "rows": len(rows), "b_min": b_min,
                         "s_min": pts[b_min], "points": sorted([b_, s_] for b_, s_ in pts.items()),
                         "params": rows[0].params, "seq_len": rows[0].seq_len}
        for r in rows:
            if r.params:
                flops.append(cost.train_flops(r.params, r.global_batch * (r.seq_len or 1)) / (r.step_ms_median * 1e-3))
    return {"models": models, "achieved_flops": statistics.median(flops) if flops else None}


def _base_profile(results: Any, hardware_name: str | None) -> HardwareProfile:
    if hardware_name:
        base = hardware.get(hardware_name)
        if base is None:
            raise CalibrationError(f"--hardware {hardware_name!r}: unknown; known: {', '.join(hardware.names())}")
        return base
    device_type = next((e.device_type for e in results.env), "cpu")
    if device_type == "cuda":
        names = " ".join(d.get("name", "") for e in results.env for d in e.devices)
        for key, prof in _GPU_NAMES:
            if key in names:
                return hardware.PROFILES[prof]
        raise CalibrationError(f"records come from GPUs {names!r} we hold no profile for; pass --hardware")
    return HardwareProfile(name="cpu-gloo", kind="cpu-gloo", description="CPU processes over gloo (calibrated)",
                           peak_tflops={}, memory_bytes=None, memory_bw_gbps=None, max_gpus_per_node=1,
                           intra=Link(name="uncalibrated", bandwidth_gbps=math.nan, alpha_us=math.nan,
                                      source="none: calibrate from bench records"),
                           inter=None, sources={"all": "calibration only"})


def calibrate(results: Any, hardware_name: str | None = None, label: str = "") -> HardwareProfile:
    """A profile fitted from a :class:`gpucomm.records.ResultSet` (bench and/or train rows).

    Raises:
        CalibrationError: no usable rows, or unknown hardware.
    """
    fits = fit_collectives(results.bench)
    compute = fit_compute(results.train)
    if not fits and not compute["models"]:
        raise CalibrationError("no usable bench rows (n >= 2, wrong == 0) or single-strategy train rows to fit")
    base = _base_profile(results, hardware_name)
    link = derived_link(fits) or base.intra
    cpus = [e.host.get("cpu_count") or 0 for e in results.env]
    max_n = max([f.n for f in fits] + [r.n_devices for r in results.train] + [base.max_gpus_per_node] + cpus)
    calib = {"collectives": [dataclasses.asdict(f) for f in fits], "compute": compute, "per_device_s": {},
             "host": _host(results),
             "sources": [str(p) for p in results.sources]}
    prof = dataclasses.replace(base, name=f"calibrated:{label or base.name}", intra=link, calibration=calib,
                               max_gpus_per_node=max_n if base.kind == "cpu-gloo" else base.max_gpus_per_node,
                               sources={**base.sources, "intra": link.source})
    return _fit_per_device(prof, results.train)


def _host(results: Any) -> dict[str, int | None]:
    """Cores of the measuring host and torch threads per process (``OMP_NUM_THREADS``, else all cores)."""
    cores = next((e.host.get("cpu_count") for e in results.env if e.host.get("cpu_count")), None)
    omp = next((e.env_vars.get("OMP_NUM_THREADS") for e in results.env if e.env_vars.get("OMP_NUM_THREADS")), None)
    threads = int(omp) if omp and omp.isdigit() else cores
    return {"cores": cores, "threads": min(threads, cores) if threads and cores else threads}


def fit_overheads(rows: Sequence[tuple[int, float, float]]) -> tuple[float, float]:
    """``(a, s)`` >= 0 with ``residual = a * n + s * compute`` by least squares over ``(n, compute, residual)``.

    ``a`` is a per-device cost (DataParallel's GIL and replication, our threads), ``s`` a compute slowdown
    (NCCL kernels competing with compute on a GPU; processes competing for cores on a CPU).  When the
    two-parameter solution is not >= 0 (or there is one row), the better of the one-parameter fits is
    taken, the per-device cost on a tie.
    """
    if not rows:
        return 0.0, 0.0
    snn = sum(n * n for n, _, _ in rows)
    scc = sum(c * c for _, c, _ in rows)
    snc = sum(n * c for n, c, _ in rows)
    snr = sum(n * r for n, _, r in rows)
    scr = sum(c * r for _, c, r in rows)
    det = snn * scc - snc * snc
    if len(rows) >= 2 and det > 1e-12 * snn * scc:
        a, s = (scc * snr - snc * scr) / det, (snn * scr - snc * snr) / det
        if a >= 0 and s >= 0:
            return a, s

    def err(a: float, s: float) -> float:
        return sum((r - a * n - s * c) ** 2 for n, c, r in rows)

    a_only = max(0.0, snr / snn) if snn else 0.0
    s_only = max(0.0, scr / scc) if scc else 0.0
    return (a_only, 0.0) if err(a_only, 0.0) <= err(0.0, s_only) else (0.0, s_only)


def _fit_per_device(profile: HardwareProfile, train: Iterable[Any]) -> HardwareProfile:
    """Per-device cost and compute slowdown per strategy from multi-device train rows.

    Where records measured the host time per device (``TrainRecord.host_ms_per_device``, written by
    ``gpucomm train`` for its one-process strategies), its median is the per-device cost and only the
    slowdown is fitted to the residual; otherwise both are fitted (:func:`fit_overheads`).
    """
    rows: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    host: dict[str, list[float]] = defaultdict(list)
    for r in train:
        if r.strategy not in plan.STRATEGIES or r.status != "ok" or not r.step_ms_median or r.n_devices < 2:
            continue
        if getattr(r, "host_ms_per_device", None):
            host[r.strategy].append(r.host_ms_per_device * 1e-3)
        wl = plan.workload_from_record(r)
        pred = plan.predict(r.strategy, profile, wl, gpus_per_node=r.n_devices, nodes=1, per_device_s=0.0,
                            slowdown=0.0)
        rows[r.strategy].append((r.n_devices, pred.compute_s, r.step_ms_median * 1e-3 - pred.step_time_s))
    fits = {k: fit_overheads(v) for k, v in rows.items()}
    measured = {k: {"s": statistics.median(v), "rows": len(v)} for k, v in host.items()}
    for k, m in measured.items():
        a, pts = m["s"], rows[k]
        scc = sum(c * c for _, c, _ in pts)
        slow = max(0.0, sum(c * (res - a * n) for n, c, res in pts) / scc) if scc else 0.0
        fits[k] = (a, slow)
    calib = {**profile.calibration, "per_device_s": {k: a for k, (a, _) in fits.items()},
             "slowdown": {k: s for k, (_, s) in fits.items()}, "host_per_device": measured}
    return dataclasses.replace(profile, calibration=calib)


def _link_from(d: dict | None) -> Link | None:
    return None if d is None else Link(**d)


def save_profile(profile: HardwareProfile, path: str | os.PathLike[str]) -> None:
    """Write ``profile`` as JSON (NaN/inf written as strings so the file stays standard JSON)."""
    data = dataclasses.asdict(profile)
    text = json.dumps(data, indent=1, default=str, allow_nan=True)
    text = text.replace("Infinity", '"inf"').replace("NaN", '"nan"')
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _floats(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_floats(v) for v in obj]
    if obj in ("inf", "nan"):
        return float(obj)
    return obj


def load_profile(path: str | os.PathLike[str]) -> HardwareProfile:
    """Read a profile written by :func:`save_profile`.

    Raises:
        CalibrationError: the file is missing or not a saved profile.
    """
    try:
        data = _floats(json.loads(Path(path).read_text(encoding="utf-8")))
        data["intra"] = _link_from(data["intra"])
        data["inter"] = _link_from(data.get("inter"))
        return HardwareProfile(**data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CalibrationError(f"--profile {str(path)!r}: not a saved gpucomm profile ({exc}); write one with "
                               f"`gpucomm advise --calibrate DIR --save-profile PATH`") from exc
