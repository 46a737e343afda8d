"""Timing the modules of :mod:`gpucomm.advisor.compute.modules` on the device at hand: a compute profile.

**How a point is timed** — the way ``gpucomm train`` times a step (:mod:`gpucomm.train.loop`), so that what is
measured is what a user's eager loop spends, host gaps included:

* warm-up iterations first (cuBLAS heuristics, allocator, autotuning), untimed; on CUDA the work then runs back
  to back for :data:`~gpucomm.advisor.compute.shapes.SETTLE_S` of its kind (0.1-0.4 s), so that the window
  sees the clock the power limit sustains under it — a training step's clock, not the idle GPU's boost (on
  the H200 a layer timed right after idle ran 3-11% fast); the host waits for the device before the window;
* then a window of timed iterations in which the host only enqueues: on CUDA an event is recorded after each
  phase of an iteration (after the forward, after the backward), nothing synchronises, and a phase's time is
  from the previous event to its own — the cadence at which the GPU completes it, launch gaps included;
* one synchronise after the window; each phase's time is the median over the timed iterations (scaled so that
  the phases sum to the median iteration).

Whole steps are timed in :data:`STEP_ROUNDS` interleaved rounds, the main pass the first, each step's median
kept (:func:`measure`): the host times the planner reads are marginals between steps, which must see one host
pace.  On CUDA the busy times of layer, matmul, attention and step points (:func:`busy_phases`, under
``torch.profiler``) are read in a second pass after every point is timed (:func:`measure`), so that no point is
timed in a process a profiler has run in.

On CPU there are no events: each phase is timed with the host clock (CPU work runs in the calling thread).
Gradients are set to None after each iteration (``zero_grad(set_to_none=True)``: the first micro-batch of a
step).  Each point builds its own module and inputs and frees them (``torch.cuda.empty_cache()``) before the
next, so that a step's peak reserved memory starts from an empty cache.  A point that runs out of memory is
left out and named in the profile (``device["skipped"]``), not retried; so is a point that fails otherwise
(and the failure is printed).

**The device** (``ComputeProfile.device``): its name and memory, NVML's power limit and maximum SM clock, the
SM clock read at the end of a second of back-to-back 8192-wide GEMMs (the clock the power limit sustains), and
a 1 GiB device-to-device copy's rate (read + write bytes: the bandwidth memory-bound work sees).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from gpucomm import hostload
from gpucomm.advisor.compute import modules
from gpucomm.advisor.compute.profile import (
    BUSY_KEYS,
    ComputeProfile,
    ProfileError,
    ProfileSource,
    layer_shape_of,
)
from gpucomm.advisor.compute.shapes import (
    SETTLE_S,
    STEP_ROUNDS,
    AttentionShape,
    EmbeddingShape,
    Grid,
    HeadShape,
    LayerShape,
    OptimizerShape,
    Rates,
    StepShape,
    expected_s,
    repeats,
    work,
)

__all__ = ["BUSY_KINDS", "FILL_KINDS", "HOST_REPEATS", "HOST_WINDOW_S", "busy_phases", "device_info", "fill_busy",
           "host_ratios", "measure", "point_key", "retime_steps", "split_busy", "time_phases"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _settle(phases: list[Callable[[], Any]], device: torch.device, seconds: float) -> None:
    """Run the phases back to back for ``seconds`` of wall time (module docstring), synchronising about every
    20 ms of work so that the host never queues more than that beyond the deadline."""
    t0 = time.perf_counter()
    for ph in phases:
        ph()
    _sync(device)
    per = max(time.perf_counter() - t0, 1e-6)
    chunk = max(1, int(0.02 / per))
    while time.perf_counter() - t0 < seconds:
        for _ in range(chunk):
            for ph in phases:
                ph()
        _sync(device)


def time_phases(phases: list[Callable[[], Any]], device: torch.device, warmup: int, timed: int,
                settle_s: float = 0.0) -> list[float]:
    """Median seconds of each phase over ``timed`` iterations after ``warmup`` and, on CUDA, ``settle_s`` of the
    same work back to back (module docstring)."""
    for _ in range(warmup):
        for ph in phases:
            ph()
    _sync(device)
    if device.type == "cuda" and settle_s > 0:
        _settle(phases, device, settle_s)
    if device.type == "cuda":
        stream = torch.cuda.current_stream(device)
        marks = [[torch.cuda.Event(enable_timing=True) for _ in range(len(phases) + 1)] for _ in range(timed)]
        for i in range(timed):
            if i == 0:
                marks[0][0].record(stream)
            for j, ph in enumerate(phases):
                ph()
                marks[i][j + 1].record(stream)
        torch.cuda.synchronize(device)
        per = []
        for i in range(timed):
            prev = marks[i - 1][-1] if i else marks[0][0]
            cuts = [prev, *marks[i][1:]]
            per.append([cuts[j].elapsed_time(cuts[j + 1]) * 1e-3 for j in range(len(phases))])
    else:
        per = []
        for _ in range(timed):
            row = []
            for ph in phases:
                t0 = time.perf_counter()
                ph()
                row.append(time.perf_counter() - t0)
            per.append(row)
    total = statistics.median(sum(r) for r in per)
    meds = [statistics.median(r[j] for r in per) for j in range(len(phases))]
    norm = total / sum(meds) if sum(meds) > 0 else 1.0
    return [m * norm for m in meds]


BUSY_ITERATIONS = 3
"""Iterations of a point run under the profiler for its busy time (:func:`busy_phases`)."""

_MARK = "spin_kernel"
"""The kernel ``torch.cuda._sleep`` launches: the marker between phases (:func:`busy_phases`)."""


def busy_phases(phases: list[Callable[[], Any]], device: torch.device,
                iterations: int = BUSY_ITERATIONS) -> list[float] | None:
    """Median seconds the device spends in kernels, copies and memsets of each phase, over ``iterations`` run
    under ``torch.profiler`` (CUPTI's device timestamps) after the point was warmed and timed; ``None`` off
    CUDA.  A marker kernel (``torch.cuda._sleep``) is enqueued before each phase and after the last, so that
    the device's activity splits into phases without reading the host's side.  This is the point's device time
    without the host's pacing: where the host issues work slower than the device runs it (a small layer's
    forward and backward, timed alone), the interval between CUDA events is the host's time, not the
    device's (module docstring of :mod:`gpucomm.advisor.compute.profile`, **Device time**)."""
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    _sync(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            for ph in phases:
                torch.cuda._sleep(1000)
                ph()
        torch.cuda._sleep(1000)
        _sync(device)
    events = [(e.start_ns(), e.duration_ns(), e.name()) for e in prof.profiler.kineto_results.events()
              if e.device_type() == DeviceType.CUDA]
    return split_busy(events, len(phases), iterations)


def split_busy(events: list[tuple[int, int, str]], n_phases: int, iterations: int) -> list[float]:
    """Per phase, the median over iterations of the seconds the device was busy between its markers
    (:func:`busy_phases`): the union of the activity intervals ``(start_ns, duration_ns, name)`` that fall
    between two consecutive marker kernels, the markers themselves left out.  Raises ``RuntimeError`` when the
    markers are not the ``n_phases x iterations + 1`` expected (a profiler that lost events)."""
    events = sorted(events)
    marks = [i for i, (_, _, name) in enumerate(events) if _MARK in name]
    if len(marks) != n_phases * iterations + 1:
        raise RuntimeError(f"busy time: {len(marks)} marker kernels in the profile, expected "
                           f"{n_phases * iterations + 1}")
    spans = []
    for a, b in zip(marks[:-1], marks[1:], strict=True):
        busy, end = 0, None
        for start, dur, _ in events[a + 1:b]:
            stop = start + dur
            if end is None or start >= end:
                busy += dur
            elif stop > end:
                busy += stop - end
            end = stop if end is None else max(end, stop)
        spans.append(busy * 1e-9)
    return [statistics.median(spans[k::n_phases]) for k in range(n_phases)]


class _Ctx:
    """What every point needs: device, autocast, compile."""

    def __init__(self, device: torch.device, precision: str, software: str, busy: bool = True,
                 window_s: float = 0.0) -> None:
        self.device, self.software = device, software
        self.busy = busy
        """Whether a point reads its busy time under the profiler right after it is timed (:func:`_busy`);
        :func:`measure` and :func:`host_ratios` time without it (see :func:`measure`)."""
        self.window_s = window_s
        """On CUDA, the least seconds of timed iterations (by the expected time of one; 0: :func:`repeats`'
        count alone) — :data:`HOST_WINDOW_S` for the probe."""
        self.autocast = precision == "bf16"
        self.dtype = torch.bfloat16 if self.autocast else torch.float32

    def amp(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast)

    def module(self, build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
        """Built on the device (a CPU-side init of the grid's 57 B layer parameters would take minutes)."""
        with self.device:
            m = modules.init_(build())
        return torch.compile(m) if self.software == "compiled" else m

    def reps(self, kind: str, expected_s: float) -> tuple[int, int, float]:
        """(warm-up iterations, timed iterations, settling seconds) of a point of ``kind``."""
        if self.device.type != "cuda":
            return 1, 3, 0.0
        warm, timed = repeats(expected_s)
        if self.window_s > 0 and expected_s > 0:
            timed = max(timed, min(200, math.ceil(self.window_s / expected_s)))
        return warm, timed, SETTLE_S[kind]


def _none_grads(*tensors_or_modules) -> None:
    for t in tensors_or_modules:
        if isinstance(t, torch.nn.Module):
            for p in t.parameters():
                p.grad = None
        else:
            t.grad = None


def _busy(ctx: _Ctx, phases: list[Callable[[], Any]], keys: tuple[str, ...]) -> dict[str, float]:
    """``busy_<key>`` of each phase (:func:`busy_phases`); empty off CUDA, or where the profiler lost its
    markers (said on stderr: the point keeps its measured times); empty where ``ctx.busy`` is off."""
    if not ctx.busy:
        return {}
    try:
        got = busy_phases(phases, ctx.device)
    except RuntimeError as exc:
        print(f"measure: {exc}; the point keeps its times without busy times", file=sys.stderr, flush=True)
        return {}
    return {} if got is None else {f"busy_{k}": v for k, v in zip(keys, got, strict=True)}


def _layer_work(ctx: _Ctx, s: LayerShape) -> list[Callable[[], Any]]:
    """One layer's forward and backward (the gradients set to None after it), as two phases."""
    mod = ctx.module(lambda: modules.layer(s))
    x = torch.randn(s.mb, s.seq, s.hidden, device=ctx.device, requires_grad=True)
    dy = torch.randn(s.mb, s.seq, s.hidden, device=ctx.device) * 1e-3
    held: dict[str, torch.Tensor] = {}

    def fwd():
        with ctx.amp():
            held["y"] = mod(x)

    def bwd():
        held.pop("y").backward(dy)
        _none_grads(mod, x)

    return [fwd, bwd]


def _layer(ctx: _Ctx, s: LayerShape, expected: float) -> dict[str, Any]:
    phases = _layer_work(ctx, s)
    f, b = time_phases(phases, ctx.device, *ctx.reps("layer", expected))
    return {"fwd_s": f, "bwd_s": b, **_busy(ctx, phases, ("fwd_s", "bwd_s"))}


def _kernels_work(ctx: _Ctx, s: LayerShape) -> list[Callable[[], Any]]:
    """The layer's matmuls alone, forward (``x W^T``) and backward (``dy W``, ``dy^T x``), in the compute dtype."""
    dev, dt = ctx.device, ctx.dtype
    mats = [(torch.randn(s.tokens, i, device=dev, dtype=dt), torch.randn(o, i, device=dev, dtype=dt),
             torch.randn(s.tokens, o, device=dev, dtype=dt)) for _, i, o in s.matmuls()]

    def fwd():
        for x, w, _ in mats:
            torch.mm(x, w.t())

    def bwd():
        for x, w, dy in mats:
            torch.mm(dy, w)
            torch.mm(dy.t(), x)

    return [fwd, bwd]


def _kernels(ctx: _Ctx, s: LayerShape, expected: float) -> dict[str, Any]:
    phases = _kernels_work(ctx, s)
    f, b = time_phases(phases, ctx.device, 1, 3, SETTLE_S["kernels"])
    return {"gemm_fwd_s": f, "gemm_bwd_s": b, **_busy(ctx, phases, ("gemm_fwd_s", "gemm_bwd_s"))}


def _attention_work(ctx: _Ctx, a: AttentionShape) -> list[Callable[[], Any]]:
    dev, dt = ctx.device, ctx.dtype
    q, k, v = (torch.randn(a.mb, a.heads, a.seq, a.head_dim, device=dev, dtype=dt, requires_grad=True)
               for _ in range(3))
    dy = torch.randn(a.mb, a.heads, a.seq, a.head_dim, device=dev, dtype=dt) * 1e-3
    held: dict[str, torch.Tensor] = {}

    def fwd():
        held["y"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def bwd():
        held.pop("y").backward(dy)
        _none_grads(q, k, v)

    return [fwd, bwd]


def _attention(ctx: _Ctx, a: AttentionShape, expected: float) -> dict[str, Any]:
    phases = _attention_work(ctx, a)
    f, b = time_phases(phases, ctx.device, *ctx.reps("attention", expected))
    return {"fwd_s": f, "bwd_s": b, **_busy(ctx, phases, ("fwd_s", "bwd_s"))}


def _embedding(ctx: _Ctx, e: EmbeddingShape, expected: float) -> dict[str, Any]:
    mod = ctx.module(lambda: modules.Embedding(e))
    idx = torch.randint(0, e.vocab, (e.mb, e.seq), device=ctx.device)
    dy = torch.randn(e.mb, e.seq, e.hidden, device=ctx.device) * 1e-3

    def step():
        mod(idx).backward(dy)
        _none_grads(mod)

    (t,) = time_phases([step], ctx.device, *ctx.reps("embedding", expected))
    return {"seconds": t}


def _head(ctx: _Ctx, h: HeadShape, expected: float) -> dict[str, Any]:
    mod = ctx.module(lambda: modules.Head(h))
    x = torch.randn(h.mb, h.seq, h.hidden, device=ctx.device, requires_grad=True)
    y = torch.randint(0, h.vocab, (h.mb, h.seq), device=ctx.device)

    def step():
        with ctx.amp():
            loss = mod(x, y)
        loss.backward()
        _none_grads(mod, x)

    (t,) = time_phases([step], ctx.device, *ctx.reps("head", expected))
    return {"seconds": t}


def _optimizer(ctx: _Ctx, o: OptimizerShape, expected: float) -> dict[str, Any]:
    dev = ctx.device
    params = [torch.randn(*shape, device=dev).mul_(0.02).requires_grad_() for shape in o.tensors()]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    opt.step()  # the states are created by the first step; a user's first step is not timed either
    (t,) = time_phases([opt.step], dev, *ctx.reps("optimizer", expected))
    return {"params": o.params(), "tensors": len(params), "seconds": t}


def _step_work(ctx: _Ctx, st: StepShape) -> tuple[list[Callable[[], Any]], int]:
    """A whole training step as one phase, and the model's parameter count."""
    s, dev = st.layer, ctx.device
    emb = EmbeddingShape(vocab=st.vocab, hidden=s.hidden, seq=s.seq, mb=s.mb, positions=s.family == "gpt")
    head = HeadShape(family=s.family, vocab=st.vocab, hidden=s.hidden, seq=s.seq, mb=s.mb, loss=st.loss)
    model = ctx.module(lambda: modules.Stack(emb, [s] * st.layers, head))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    idx = torch.randint(0, st.vocab, (s.mb, s.seq), device=dev)
    tgt = torch.randint(0, st.vocab, (s.mb, s.seq), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with ctx.amp():
            loss = model(idx, tgt)
        loss.backward()
        opt.step()

    return [step], sum(p.numel() for p in model.parameters())


def _step(ctx: _Ctx, st: StepShape, expected: float) -> dict[str, Any]:
    dev = ctx.device
    phases, params = _step_work(ctx, st)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    (t,) = time_phases(phases, dev, *ctx.reps("step", expected))
    out: dict[str, Any] = {"seconds": t, "params": params}
    if dev.type == "cuda":
        out["peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated(dev))
        out["peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved(dev))
    else:
        out["peak_allocated_bytes"] = out["peak_reserved_bytes"] = 0
    return {**out, **_busy(ctx, phases, ("seconds",))}  # after the peaks: the profiler's pass is not the step's


def step_seconds(ctx: _Ctx, layer: LayerShape, vocab: int, layers: int, loss: str = "upcast",
                 expected: float | None = None) -> float:
    """One whole step (:func:`_step`) of ``layers`` layers of ``layer``, timed as a profile point is;
    ``expected``: the seconds one is expected to take (default: :func:`expected_s`'s planning estimate), which
    sizes its timed window."""
    st = StepShape(layer=layer, vocab=vocab, layers=layers, loss=loss)
    return _step(ctx, st, expected if expected else expected_s("step", st, Rates()))["seconds"]


def _step_rounds(ctx: _Ctx, rows: list[dict[str, Any]], times: list[list[float]], rounds: int,
                 seconds: float | None, say: Callable[[str], None], before: int = 0) -> tuple[int, bool]:
    """Time every step of ``rows`` once a round, in their order, for ``rounds`` rounds, appending each time to
    its list in ``times``; returns the whole rounds done and whether an interrupt (Ctrl-C, SIGTERM) stopped them.
    ``seconds``: no round starts that the time left cannot hold at the longest round so far's pace.  A round
    an interrupt cut is dropped from ``times``: every step keeps the same number of rounds.  ``before``: rounds
    already in ``times`` (the progress lines count them)."""
    had = [len(t) for t in times]
    t0, longest, done, stopped = time.perf_counter(), 0.0, 0, False
    try:
        for k in range(rounds):
            left = None if seconds is None else seconds - (time.perf_counter() - t0)
            if k and left is not None and left < longest:
                say(f"measure: {left:.0f} s left, a round takes {longest:.0f} s; stopping after {before + k} rounds")
                break
            start = time.perf_counter()
            for i, r in enumerate(rows):
                times[i].append(step_seconds(ctx, layer_shape_of(r["layer"]), r["vocab"], r["layers"],
                                             r.get("loss", "upcast"), expected=r["seconds"]))
                if ctx.device.type == "cuda":
                    torch.cuda.empty_cache()
            done, longest = k + 1, max(longest, time.perf_counter() - start)
            say(f"measure: step round {before + done}/{before + rounds} of {len(rows)} steps, "
                f"{time.perf_counter() - t0:.0f} s")
    except KeyboardInterrupt:
        stopped = True
        say(f"measure: interrupted in step round {before + done + 1}; keeping the {before + done} rounds done")
    for t, n in zip(times, had, strict=True):
        del t[n + done:]
    return done, stopped


def _medians(rows: list[dict[str, Any]], times: list[list[float]]) -> dict[str, float]:
    """Each row's ``seconds`` set to the median of its times; returns each step's slowest round over its fastest
    (median and max over the steps)."""
    spread = []
    for r, got in zip(rows, times, strict=True):
        r["seconds"] = statistics.median(got)
        spread.append(max(got) / min(got))
    return {"median": round(statistics.median(spread), 3), "max": round(max(spread), 3)}


def retime_steps(profile: ComputeProfile, device: torch.device, *, rounds: int = STEP_ROUNDS,
                 seconds: float | None = None, progress: Callable[[str], None] | None = None,
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The profile's whole steps timed again on ``device``, interleaved: ``rounds`` rounds, each timing every
    step once in the profile's order; each step's time is the median of its rounds.  Returns the step rows with
    ``seconds`` replaced (their busy times and memory peaks kept: the same work on a GPU of the same model) and
    what ran (``rounds`` done, seconds, each step's slowest round over its fastest).  For a profile measured
    before :func:`measure` timed its steps in rounds (``device["step_rounds"]`` absent).

    Why interleaved: a mode's host time is a layer's marginal between two whole steps (``profile._step_host``),
    and ``--host this`` scales every mode by its family's ``op`` reading — which holds only if the profile's
    modes were timed at one host pace.  Timed once each, in a pass of minutes, they were not: in the r28 H200
    profile the GPT ``op`` steps ran at a fast pace and the ``full`` ones at a slow one (GPT ``full`` over ``op``
    host time 0.97, against 0.60 and 0.73 in two other measurements of the same code,
    benchmarks/results/advisor-profile-r28_h200x1_2026-12-05/README.md), and device-bound ``full`` cases were
    priced host-paced.  Interleaved, every step sees the same mix of the host's paces, and the median of
    rounds is what one burst does not set.

    ``seconds``: no round starts that the time left cannot hold at the longest round so far's pace.  An
    interrupt (Ctrl-C, SIGTERM) ends the rounds; the rounds done are kept.

    Raises:
        ProfileError: fewer than two whole rounds done (one round is the single timing this replaces).
    """
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    rows = [dict(r) for r in profile.points.get("step", [])]
    ctx = _Ctx(device, profile.precision, profile.software, busy=False)
    times: list[list[float]] = [[] for _ in rows]
    t0 = time.perf_counter()
    done, _ = _step_rounds(ctx, rows, times, max(1, rounds), seconds, say)
    if done < 2:
        raise ProfileError(f"retime_steps: {done} whole round(s) of {len(rows)} steps done; two or more are "
                           f"needed (one is the single timing this replaces); give it more time")
    spread = _medians(rows, times)
    return rows, {"rounds": done, "retime_s": round(time.perf_counter() - t0, 1), "round_spread": spread}


_MEASURE = {"layer": _layer, "kernels": _kernels, "attention": _attention, "embedding": _embedding,
            "head": _head, "optimizer": _optimizer, "step": _step}


def device_info(device: torch.device) -> dict[str, Any]:
    """Name, memory, power limit, clocks and copy bandwidth of ``device`` (module docstring)."""
    if device.type != "cuda":
        import platform

        return {"type": "cpu", "name": "cpu", "processor": platform.processor() or platform.machine()}
    props = torch.cuda.get_device_properties(device)
    info: dict[str, Any] = {"type": "cuda", "name": props.name, "memory_bytes": int(props.total_memory),
                            "multiprocessors": props.multi_processor_count,
                            "capability": f"{props.major}.{props.minor}"}
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda._get_nvml_device_index(device))
        info["power_limit_w"] = pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0
        info["sm_clock_max_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            for _ in range(8):
                a @ a
            torch.cuda.synchronize(device)
        info["sm_clock_sustained_mhz"] = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        info["power_draw_w"] = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        del a
    except Exception as exc:  # the clocks are context for derivations; their absence must not lose a profile
        info["nvml_error"] = f"{type(exc).__name__}: {exc}"
    bufs = [torch.empty(2**30, dtype=torch.uint8, device=device) for _ in range(2)]
    (t,) = time_phases([lambda: bufs[1].copy_(bufs[0])], device, 2, 10)
    info["copy_gbps"] = 2 * 2**30 / t / 1e9
    bufs.clear()
    torch.cuda.empty_cache()
    return info


def point_key(kind: str, key: dict[str, Any]) -> tuple[str, str]:
    """One point's identity in a profile: its kind and its shape (``--merge`` adds only points a profile lacks)."""
    return kind, json.dumps(key, sort_keys=True)


def measure(grid: Grid, device: torch.device, *, software: str = "eager", precision: str = "bf16",
            grid_name: str = "", env: dict[str, Any] | None = None,
            progress: Callable[[str], None] | None = None,
            have: frozenset[tuple[str, str]] = frozenset(), step_rounds: int = STEP_ROUNDS) -> ComputeProfile:
    """Time every point of ``grid`` on ``device`` (but those whose :func:`point_key` is in ``have``) and return
    the profile (module docstring).

    Every point is timed first, then the busy times of those of :data:`_WORK`'s kinds are read in a second pass
    (:func:`fill_busy`, each point built, warmed and settled again): a finished ``torch.profiler`` pass can
    leave CUPTI attached to the process (Kineto tears it down only with ``TEARDOWN_CUPTI=1``,
    pytorch/pytorch#144455), and the points timed after one would carry its cost where a user's training does
    not — a host-bound point most.  The second pass builds and settles each point again: on the H200 the busy
    times of the shipped grid's 558 layer, matmul and attention points took 268 s that way
    (benchmarks/results/gpu-logs-r16_h200x1_2026-12-04/measure-merge.txt).

    Whole steps are timed in ``step_rounds`` interleaved rounds (:func:`_step_rounds`; the main pass is the
    first), each step's median kept, before the busy pass: a mode's host time is the marginal between two of
    its whole steps, and steps timed once each, minutes apart, read the host's paces of those minutes — the
    r28 H200 profile's GPT ``full`` and ``op`` steps disagreed by 1.6x in host time that way
    (:func:`retime_steps`).  ``device["step_rounds"]`` records the rounds done, ``device["step_spread"]``
    each step's slowest round over its fastest.  An interrupt in any pass keeps what was done (whole rounds)."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    ctx = _Ctx(device, precision, software, busy=False)
    info = device_info(device)
    todo = [(kind, shape) for kind, shape in work(grid) if point_key(kind, shape.key()) not in have]
    say(f"measure: {info['name']}" + (f", {info.get('power_limit_w', 0):g} W, SM {info.get('sm_clock_sustained_mhz')}"
                                       f" MHz under load, copy {info['copy_gbps']:,.0f} GB/s"
                                       if device.type == "cuda" else "") + f"; {len(todo)} points")
    points: dict[str, list[dict[str, Any]]] = {k: [] for k in _MEASURE}
    skipped: list[str] = []
    t0 = time.perf_counter()
    last = ""
    for i, (kind, shape) in enumerate(todo):
        if kind != last and kind not in ("kernels", "attention") or i % 50 == 0:
            say(f"measure: {i}/{len(todo)} points, {kind}, {time.perf_counter() - t0:.0f} s")
            last = kind
        try:
            got = _MEASURE[kind](ctx, shape, expected_s(kind, shape, Rates()))
        except torch.OutOfMemoryError:
            skipped.append(f"{kind} {shape.key()}: out of memory")
            got = None
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (gpucomm measure turns it into this): keep what was measured
            info["interrupted"] = f"after {i} of {len(todo)} points"
            say(f"measure: interrupted after {i} of {len(todo)} points; saving those")
            break
        except Exception as exc:  # one broken point must not lose the others: named in the profile, and said
            line = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            skipped.append(f"{kind} {shape.key()}: {line}")
            say(f"measure: {kind} point failed ({line}); left out")
            got = None
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        if got is not None:
            points[kind].append({**shape.key(), **got})
    if points["step"] and "interrupted" not in info and step_rounds > 1:  # the main pass was round 1
        times = [[r["seconds"]] for r in points["step"]]
        done, stopped = _step_rounds(ctx, points["step"], times, step_rounds - 1, None, say, before=1)
        info["step_spread"] = _medians(points["step"], times)
        info["step_rounds"] = 1 + done
        if stopped:
            info["interrupted"] = f"in step round {done + 2} of {step_rounds}"
    elif points["step"]:
        info["step_rounds"] = 1
    if device.type == "cuda":
        info["settle_s"] = dict(SETTLE_S)
    if skipped:
        info["skipped"] = skipped
    prof = ComputeProfile(device=info, software=software, precision=precision, grid=grid_name, env=dict(env or {}),
                          points=points)
    if "interrupted" not in info:  # the busy pass, after every point is timed (docstring)
        points, _, complete = fill_busy(prof, device, progress, kinds=BUSY_KINDS)
        if not complete:
            info["busy_interrupted"] = True
        prof = dataclasses.replace(prof, points=points)
    info["measure_s"] = round(time.perf_counter() - t0, 1)
    say(f"measure: done in {info['measure_s']:.0f} s" + (f"; {len(skipped)} points left out" if skipped else ""))
    return prof



_WORK: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "layer": (_layer_work, BUSY_KEYS["layer"]), "kernels": (_kernels_work, BUSY_KEYS["kernels"]),
    "attention": (_attention_work, BUSY_KEYS["attention"]), "step": (lambda ctx, st: _step_work(ctx, st)[0],
                                                                     ("seconds",))}
"""The kinds whose points get busy times — those the host paces at small shapes (a layer's forward and backward
issue some 40-150 kernels and autograd nodes; a whole step its layers' and more); the head, embedding and
optimizer points are a few large kernels each — with each one's work as phases and the time keys they set."""


def _shape_of(kind: str, row: dict[str, Any]) -> Any:
    """The shape a profile row of ``kind`` (one of :data:`_WORK`'s) was measured at."""
    if kind == "step":
        return StepShape(layer=layer_shape_of(row["layer"]), vocab=row["vocab"], layers=row["layers"],
                         loss=row.get("loss", "upcast"))
    if kind == "attention":
        return AttentionShape(head_dim=row["head_dim"], heads=row["heads"], seq=row["seq"], mb=row["mb"])
    return layer_shape_of(row if kind == "layer" else {**row, "ac": row.get("ac", "none")})


BUSY_KINDS = tuple(_WORK)
"""The kinds :func:`measure`'s own busy pass reads (whole steps among them); ``gpucomm measure --merge`` reads
the same when it completes a run interrupted before that pass ended, so the completed profile has what an
uninterrupted run would have had."""

FILL_KINDS = tuple(BUSY_KEYS)
"""The kinds :func:`fill_busy` measures busy times of: those the lookups price the device from (a whole step's
busy time is recorded when the step is measured, not read by the lookups)."""


def fill_busy(profile: ComputeProfile, device: torch.device, progress: Callable[[str], None] | None = None,
              kinds: tuple[str, ...] = ()) -> tuple[dict[str, list[dict[str, Any]]], int, bool]:
    """``profile``'s points with the busy times (:func:`busy_phases`) of those of ``kinds`` (default
    :data:`FILL_KINDS`) that lack them, measured here (:func:`measure`'s second pass; ``gpucomm measure --merge``
    of a profile measured before busy times were recorded); how many were measured; and whether every one was
    (an interrupt stops between points: those done are kept).
    Each point is built, warmed and settled as when it was timed; its measured times are kept.  A point that
    runs out of memory or fails keeps its times without busy times."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    ctx = _Ctx(device, profile.precision, profile.software)
    points = {k: [dict(r) for r in v] for k, v in profile.points.items()}
    todo = [(kind, row) for kind in (kinds or FILL_KINDS) for row in points.get(kind, [])
            if any(f"busy_{k}" not in row for k in _WORK[kind][1])]
    if device.type != "cuda" or not todo:
        return points, 0, True
    say(f"measure: busy times of {len(todo)} points")
    done, t0 = 0, time.perf_counter()
    for i, (kind, row) in enumerate(todo):
        if i % 50 == 0:
            say(f"measure: busy {i}/{len(todo)} points, {kind}, {time.perf_counter() - t0:.0f} s")
        work, keys = _WORK[kind]
        try:
            phases = work(ctx, _shape_of(kind, row))
            for _ in range(2):
                for ph in phases:
                    ph()
            _settle(phases, device, SETTLE_S[kind])
            got = _busy(ctx, phases, keys)
        except KeyboardInterrupt:
            say(f"measure: interrupted after {i} of {len(todo)} busy times; saving those")
            return points, done, False
        except Exception as exc:  # torch.OutOfMemoryError among them: the point keeps its measured times
            say(f"measure: busy time of a {kind} point failed ({type(exc).__name__}); left without")
            got = {}
        finally:
            phases = None
            torch.cuda.empty_cache()
        row.update(got)
        done += bool(got)
    return points, done, True


HOST_WINDOW_S = 0.3
"""Least seconds of timed iterations of each of the probe's steps (:func:`host_ratios`), sized by the profile's
own time of that step.  A profile point's window is 5 iterations — 60 ms for the 2-layer GPT ``op`` step of
12 ms — and on a lent H200 the probe's reading moved 0.78-1.29x between probes seconds apart while the step it
was to price (gpt-1.3b ``op``, 10 timed steps of ~115 ms, a 1.2 s window) held 113.3-117.6 ms
(benchmarks/results/host-adjacent_h200x1_2026-12-04.txt): a host burst of a tenth of a second sets a 60 ms
median, not a 1 s one.  The probe took 15-23 s with 60 ms windows and a busy pass after each step; 0.3 s
windows without the passes are meant to keep it there (not yet timed on a GPU: its assumption line says how
long it took)."""

HOST_REPEATS = 5
"""Rounds of :func:`host_ratios`' timings, (family, mode) readings interleaved, the median of each.  One H200
machine's host moved back-to-back single timings of one probe by up to 1.6x within a minute (0.83-1.36,
benchmarks/results/gpu-logs-r9_h200x1_2026-12-04/host-probe.txt); the median of five is what a neighbour's burst
of load does not set alone."""


def host_ratios(src: ProfileSource, repeats: int = HOST_REPEATS) -> tuple[dict[tuple[str, str], float], str]:
    """This machine's host against the profile's, per (family, checkpointing mode) — and the assumption line
    that says so.

    It measures again, on a GPU of the profile's model (or, for a derived source, of the model it prices:
    ``src.probe_gpus``) and the way the profile measured it, what priced the host time: for each (family, mode)
    whose host time came from whole steps (:meth:`ProfileSource.host_steps`), the two steps of the profile's most host-paced step shape of that mode, and their marginal time a layer
    here over the host time a layer the profile prices (so the product is this machine's marginal); for a
    family with no such ``op`` steps, the isolated ``op`` layer point with the least device work
    (:meth:`ProfileSource.host_points`), here over there, keyed ``(family, "op")``.  A mode not read here takes
    its family's ``op`` reading (:meth:`ProfileSource.host_ratio`).  ``repeats`` rounds, modes interleaved, the
    median of each timing.

    Why the steps: the host time the model prices is a layer's marginal inside whole steps, and an isolated
    layer is not a steady proxy for it — on one H200 machine the isolated point read GPT's host at 0.84x the
    profile's and the whole steps at 1.15x, Llama's at 1.12x and 0.81x
    (benchmarks/results/host-probe-r2_h200x1_2026-12-04.txt).  On a derived GPU (an H100 for the H200
    profile) the same steps read the same quantity: they are the profile's most host-paced (the r28 H200
    profile's GPT op pair keeps the device busy 1.1 ms of a 4.4 ms layer marginal, Llama's 1.5 of 12.2 ms), and
    the derivation's slowest factor (x1.43, memory-bound work) leaves them host-paced; a host fast enough to
    make them device-paced is overstated, as on the profile's own GPU.  Two lent H100s ran the host-paced op
    steps of gpt-1.3b 1.32x apart (145.3 and 110.2 ms; benchmarks/results/derived-h100-r29_h100x1_2026-12-06),
    which the profile's host cannot price.  Which modes are read:
    :data:`~gpucomm.advisor.compute.profile.PROBED_MODES`.  A step here that the device paces (a fast host) reads the device's time,
    which overstates this host's, never understates it.  Without the profile's busy passes (``_Ctx.busy``):
    the probe needs the times alone, and a finished ``torch.profiler`` pass can leave CUPTI attached to the
    process (pytorch/pytorch#144455) — the host it reads is the one a training process without a profiler has.
    The line says how long the probe took and, where the platform counts it, the hypervisor's steal of this
    machine's CPUs meanwhile (:mod:`gpucomm.hostload`): on a shared virtual machine the host's other tenants
    move a host-paced step, and a reading taken under steal holds only while that load does.

    Raises:
        ProfileError: no device of the profile's model here (one line naming ``--host``, the fix).
    """
    prof = src.profile
    steps = src.host_steps()
    points = {fam: row for fam, row in src.host_points().items() if (fam, "op") not in steps}
    keys = sorted(set(steps) | {(fam, "op") for fam in points})
    if not keys:
        return {}, "--host this: the profile has no host-paced points; the host's time is not part of its steps"
    if prof.cpu:
        device = torch.device("cpu")
        here_name = "cpu"
    else:
        if not torch.cuda.is_available():
            raise ProfileError(f"--host this: times the profile's host-paced points on this machine's "
                               f"{' or '.join(src.probe_gpus)}, and this machine has no CUDA device; leave --host "
                               f"out to price the profile's host")
        device = torch.device("cuda", torch.cuda.current_device())
        here_name = torch.cuda.get_device_name(device)
        if here_name not in src.probe_gpus:
            where = " or ".join(src.probe_gpus)
            raise ProfileError(f"--host this: times the profile's host-paced steps on {where} and this machine's "
                               f"GPU is {here_name}; run it where such a GPU is, or leave --host out")
    ctx = _Ctx(device, prof.precision, prof.software, busy=False, window_s=HOST_WINDOW_S)
    times: dict[tuple[str, str, int], list[float]] = {}
    t0, cpus = time.perf_counter(), hostload.snapshot()
    for _ in range(max(1, repeats)):
        for key in keys:
            if key in steps:
                for r in steps[key][:2]:
                    got = step_seconds(ctx, layer_shape_of(r["layer"]), r["vocab"], r["layers"],
                                       r.get("loss", "upcast"), expected=r["seconds"])
                    times.setdefault((*key, r["layers"]), []).append(got)
            else:
                s = layer_shape_of(points[key[0]])
                got = _layer(ctx, s, expected_s("layer", s, Rates()))
                times.setdefault((*key, 0), []).append(got["fwd_s"] + got["bwd_s"])
            if device.type == "cuda":
                torch.cuda.empty_cache()
    took, steal = time.perf_counter() - t0, hostload.steal_since(cpus)
    ratios, said = {}, []
    for key in keys:
        fam, mode = key
        if key in steps:
            a, b, there = steps[key]
            s = layer_shape_of(a["layer"])
            ta, tb = (statistics.median(times[(*key, r["layers"])]) for r in (a, b))
            here = src.marginal_s(a["layer"], a["vocab"], (a["layers"], ta), (b["layers"], tb))
            rounds = [src.marginal_s(a["layer"], a["vocab"], (a["layers"], x), (b["layers"], y))
                      for x, y in zip(times[(*key, a["layers"])], times[(*key, b["layers"])], strict=True)]
            what = (f"{fam} {s.hidden}-wide {s.mb}x{s.seq} {mode} steps of {a['layers']} and {b['layers']} layers: "
                    f"{here * 1e3:.2f} ms a layer here (medians of {len(rounds)}; one round's "
                    f"{min(rounds) * 1e3:.2f}-{max(rounds) * 1e3:.2f}), {there * 1e3:.2f} ms in the profile")
            if here <= 0:  # the longer step ran no slower: the difference says nothing of this host
                here = there
                what += "; unreadable here (the longer step ran no slower), the profile's kept"
        else:
            row = points[fam]
            s = layer_shape_of(row)
            got = times[(*key, 0)]
            here, there = statistics.median(got), row["fwd_s"] + row["bwd_s"]
            what = (f"{fam} {s.hidden}-wide {s.mb}x{s.seq} op layer {there * 1e3:.2f} ms in the profile, "
                    f"{here * 1e3:.2f} ms here (median of {len(got)}, {min(got) * 1e3:.2f}-{max(got) * 1e3:.2f})")
        ratios[key] = here / there
        said.append(f"{what} (x{here / there:.2f})")
    from gpucomm.env import collect_env

    cpu_here = collect_env(device.type).host.get("cpu_model", "?")
    cpu_there = prof.env.get("host", {}).get("cpu_model", "not recorded")
    return ratios, (f"host: this machine's ({cpu_here}; the profile's: {cpu_there}), its host time scaled by what "
                    f"priced the profile's, timed again here on the {here_name} in {took:.0f} s"
                    + (f" (hypervisor {steal})" if steal else "") + ": " + "; ".join(said))
