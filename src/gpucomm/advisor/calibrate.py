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
  Every measured size is also kept (``collective_points``): between two measured sizes the time is
  interpolated, so the profile reproduces each measurement exactly (:func:`gpucomm.advisor.fits.collective_time_s`).
* **Compute.** ``single`` train rows give, per model, the measured step at each global batch (and the line
  ``c0 + c1 * samples`` through them, slope kept >= 0, whose intercept is the per-step fixed part):
  :mod:`gpucomm.advisor.measured` prices a layout of that model from them.  Models that were not measured
  keep the datasheet model with the GEMM efficiency scaled so that it reproduces the measured ones
  (:func:`calibrated_efficiency`).
* **Per-device costs and slowdown.** Train rows of each wrapper (``dp`` -> DataParallel, ``replicated``,
  ``ddp``, at any device count) give, after subtracting the model's prediction without them,
  ``residual = a * n + s * compute`` (:func:`fit_overheads`): a per-device cost in seconds (DataParallel's
  GIL/replication cost; our threads' cost) and a compute slowdown (communication kernels or processes
  competing with compute), both >= 0 (:mod:`gpucomm.advisor.wrappers`).  (A record's ``host_ms_per_device`` is
  not added: the host clock around a step includes the time the host waits for the devices, so adding it
  to the devices' time would count that time twice; the fit takes what the step really cost.)

After calibration, predicting each configuration the records measured gives the measured step time (within the
noise the fit leaves: exactly for one row per wrapper), which :func:`reproduce` reports.  Devices of one host
share it: CPU "devices" share its cores (``max(1, n x threads / cores)``), and several devices on one GPU
(``--devices cuda:0,cuda:0``) run one after another (``Job.colocated``).

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

from gpucomm import models
from gpucomm.advisor import hardware, layout, search, timing, wrappers
from gpucomm.advisor.fits import CollectiveFit, collective_fit, collective_time_s
from gpucomm.advisor.hardware import HardwareProfile, Link
from gpucomm.advisor.job import Job
from gpucomm.advisor.precision import PrecisionError, from_record

__all__ = ["BANDS", "CalibrationError", "CollectiveFit", "calibrate", "calibrated_efficiency", "collective_fit",
           "colocated", "fit_alpha_beta", "fit_collectives", "fit_compute", "fit_overheads", "job_for_record",
           "load_profile", "reproduce", "save_profile"]

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


def _best_times(bench: Iterable[Any]) -> dict[tuple[str, int, str], dict[int, float]]:
    """The fastest correct median per (op, n, scope) and size (the best available implementation)."""
    best: dict[tuple[str, int, str], dict[int, float]] = defaultdict(dict)
    for r in bench:
        if r.wrong > 0 or r.n < 2 or r.time_us_median <= 0:
            continue
        key = (r.op, r.n, _scope(r))
        prev = best[key].get(r.size)
        best[key][r.size] = r.time_us_median if prev is None else min(prev, r.time_us_median)
    return best


def collective_points(bench: Iterable[Any]) -> list[dict[str, Any]]:
    """Every measured size of every (op, n, scope), fastest backend: what interpolation reproduces."""
    return [{"op": op, "n": n, "scope": scope, "points": sorted([s, t] for s, t in by_size.items())}
            for (op, n, scope), by_size in sorted(_best_times(bench).items())]


def fit_collectives(bench: Iterable[Any]) -> list[CollectiveFit]:
    """Fits for every (op, n, scope) in ``bench`` rows that were measured correctly (``wrong <= 0``).

    Where several backends measured the same (op, n, scope), the faster median per size is kept: the
    model predicts what the best available implementation does.
    """
    fits: list[CollectiveFit] = []
    for (op, n, scope), by_size in sorted(_best_times(bench).items()):
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
    """Per model, the measured ``single`` steps by global batch and the line ``c0 + c1 * samples`` through them."""
    by_model: dict[str, list[Any]] = defaultdict(list)
    for r in train:
        if r.strategy == "single" and r.status == "ok" and r.step_ms_median:
            by_model[r.model].append(r)
    fitted = {}
    for model, rows in by_model.items():
        by_batch: dict[int, list[float]] = defaultdict(list)
        for r in rows:
            by_batch[r.global_batch].append(r.step_ms_median * 1e-3)
        pts = {b_: statistics.median(v) for b_, v in by_batch.items()}  # repeats of one batch: their median
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
        fitted[model] = {"c0_s": c0, "c1_s_per_sample": c1, "rows": len(rows),
                         "points": sorted([b_, s_] for b_, s_ in pts.items()), "params": rows[0].params,
                         "seq_len": rows[0].seq_len, "precision": rows[0].precision}
    return {"models": fitted}


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

    ``label`` names what it was calibrated from in the profile's sources (the name stays short: the base
    profile's name and "calibrated").

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
    calib = {"collectives": [dataclasses.asdict(f) for f in fits], "collective_points": collective_points(results.bench),
             "compute": compute, "per_device_s": {}, "host": _host(results),
             "comm_in_wrapper": not fits and not math.isfinite(link.bandwidth_gbps),
             "from": label or ", ".join(str(p) for p in results.sources)}
    prof = dataclasses.replace(base, name=f"{base.name} (calibrated)", intra=link, calibration=calib,
                               max_gpus_per_node=max_n if base.kind == "cpu-gloo" else base.max_gpus_per_node,
                               sources={**base.sources, "intra": link.source})
    eff, how = calibrated_efficiency(prof)
    if eff is not None:
        prof = dataclasses.replace(prof, gemm_efficiency=eff, sources={**prof.sources, "gemm_efficiency": how})
    return _fit_per_device(prof, results.train)


def calibrated_efficiency(profile: HardwareProfile) -> tuple[float | None, str]:
    """The GEMM efficiency that reproduces the measured ``single`` steps of a GPU profile (None on CPU).

    For every calibrated model that is a preset of :mod:`gpucomm.models`, the datasheet model predicts one
    GPU's step at each measured batch; the efficiency is scaled by predicted / measured (the step is close to
    inversely proportional to it) and the median over the points is used.  Memory-bound work and the size
    factor stay modelled, so the calibrated figure carries to models and shapes that were not measured.
    """
    compute = (profile.calibration or {}).get("compute") or {}
    if profile.peak_flops("bf16") is None or not profile.memory_bw_gbps:
        return None, ""
    base = profile.gemm_efficiency or timing.GEMM_EFFICIENCY
    ratios = []
    for name, fit in (compute.get("models") or {}).items():
        arch = models.ARCHITECTURES.get(name)
        if arch is None:
            continue
        for batch, step_s in fit.get("points") or []:
            try:
                prec = from_record(fit.get("precision") or "bf16-autocast")
            except PrecisionError:
                continue
            job = Job(arch=arch, profile=profile, nodes=1, gpus_per_node=1, global_batch=int(batch),
                      seq=fit.get("seq_len") or arch.seq, precision=prec, efficiency=base)
            t = timing.step_time(job, layout.Layout(mb=int(batch)))
            if step_s > 0:
                ratios.append(t.step_s / step_s)
    if not ratios:
        return None, ""
    ratios.sort()
    eff = min(1.0, base * ratios[len(ratios) // 2])
    return eff, (f"GEMM efficiency {eff:.2f} of peak, calibrated on {len(ratios)} measured single-GPU steps "
                 f"(train records)")


def colocated(profile: HardwareProfile, n: int, devices: Sequence[str] = ()) -> float:
    """How many participants share one device's compute: several listed on one GPU (``cuda:0,cuda:0``), or
    CPU "devices" sharing the host's cores with ``threads`` torch threads each (``max(1, n threads / cores)``:
    with torch's default of one thread per core, n devices of b samples take as long as one of n b)."""
    if devices and any(d.startswith("cuda") for d in devices):
        return len(devices) / max(1, len(set(devices)))
    if profile.kind != "cpu-gloo":
        return 1.0
    host = (profile.calibration or {}).get("host") or {}
    cores = host.get("cores")
    if not cores:  # records without the host's core count: no sharing assumed
        return 1.0
    threads = host.get("threads") or cores
    return max(1.0, n * threads / cores)


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


def job_for_record(profile: HardwareProfile, r: Any) -> tuple[Job, layout.Layout] | None:
    """The job and preset layout a ``gpucomm train`` record ran, or None when the advisor cannot model it (a
    model that is not a transformer preset, a strategy that is not a preset)."""
    arch = models.ARCHITECTURES.get(r.model)
    if arch is None or r.strategy not in layout.STRATEGIES or not r.seq_len:
        return None
    try:
        prec = from_record(r.precision)
    except PrecisionError:
        return None
    n = r.n_devices
    job = Job(arch=arch, profile=profile, nodes=1, gpus_per_node=n, global_batch=r.global_batch, seq=r.seq_len,
              precision=prec, colocated=colocated(profile, n, getattr(r, "devices", []) or []))
    try:
        lo = layout.preset(r.strategy, n, r.global_batch)
    except layout.LayoutError:
        return None
    return job, lo


def _predict(job: Job, lo: layout.Layout) -> float:
    return search.evaluate(job, lo).time.step_s


def _fit_per_device(profile: HardwareProfile, train: Iterable[Any]) -> HardwareProfile:
    """Per-device cost and compute slowdown per wrapper from train rows (module docstring)."""
    bare = dataclasses.replace(profile, calibration={**profile.calibration,
                                                     "per_device_s": dict.fromkeys(wrappers.STRATEGY_WRAPPER.values(),
                                                                                   0.0)})
    rows: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for r in train:
        wrap = wrappers.STRATEGY_WRAPPER.get(r.strategy)
        if wrap in (None, "none") or r.status != "ok" or not r.step_ms_median:
            continue
        made = job_for_record(bare, r)
        if made is None:
            continue
        job, lo = made
        try:
            t = search.evaluate(job, lo).time
        except (ValueError, timing.CollectiveUnknown):
            continue
        rows[wrap].append((lo.dp, t.compute_s, r.step_ms_median * 1e-3 - t.step_s))
    fits = {k: fit_overheads(v) for k, v in rows.items()}
    calib = {**profile.calibration, "per_device_s": {k: a for k, (a, _) in fits.items()},
             "slowdown": {k: s for k, (_, s) in fits.items()}}
    return dataclasses.replace(profile, calibration=calib)


def reproduce(profile: HardwareProfile, results: Any) -> list[dict[str, Any]]:
    """Each configuration the records measured, predicted by ``profile``: train rows (strategy, model, devices,
    batch) and bench rows (op, n, size; the fastest backend, which the advisor predicts), with the measured
    and predicted seconds, or why it is left out."""
    out: list[dict[str, Any]] = []
    for r in results.train:
        what = f"train {r.strategy} {r.model} x{r.n_devices} batch {r.global_batch}"
        if r.status != "ok" or not r.step_ms_median:
            continue
        made = job_for_record(profile, r)
        if made is None:
            out.append({"what": what, "measured_s": r.step_ms_median * 1e-3, "predicted_s": None,
                        "why": f"{r.model!r} is not a transformer preset the advisor models"})
            continue
        try:
            t = search.evaluate(*made).time.step_s
        except (ValueError, timing.CollectiveUnknown) as exc:
            out.append({"what": what, "measured_s": r.step_ms_median * 1e-3, "predicted_s": None, "why": str(exc)})
            continue
        out.append({"what": what, "measured_s": r.step_ms_median * 1e-3, "predicted_s": t, "why": ""})
    cal = profile.calibration or {}
    for (op, n, scope), by_size in sorted(_best_times(results.bench).items()):
        for size, t_us in sorted(by_size.items()):  # the fastest backend: what the advisor predicts
            t = collective_time_s(cal, op, n, size, scope)
            out.append({"what": f"bench {op} n={n} {scope} {size} B", "measured_s": t_us * 1e-6, "predicted_s": t,
                        "why": "" if t is not None else "no fit"})
    return out


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
