"""A user's training loop under ``gpucomm.parallel.ReplicatedDataParallel`` against ``nn.DataParallel`` and a plain loop.

Question: is the library a drop-in upgrade for a user's own loop?  With one device it must cost nothing
(the plain loop's step time and memory); with several replicas its host time per replica-step must not
exceed DataParallel's, and with CUDA graphs it must be a small fraction of the GPU time, so that one
process can feed many GPUs.  Usage::

    python benchmarks/parallel_vs_dataparallel.py                       # H200: GPT-124M, 16x1024 per replica
    python benchmarks/parallel_vs_dataparallel.py --device cpu --model gpt-tiny --batch 4 --steps 2 --rounds 1

**The loop** (GPT-124M from :mod:`gpucomm.models`, nanoGPT-shaped; bf16 autocast on CUDA, fused AdamW; batches
pinned beforehand, as ``DataLoader(pin_memory=True)`` gives them), written as a user writes it for each side:

* ``plain``: ``loss = F(model(x), y); loss.backward(); opt.step(); opt.zero_grad()`` on one device;
* ``eager``: ``loss = model.loss(F, model(x), y); loss.backward(); model.optimizer.step(); ...zero_grad()``
  with ``model = ReplicatedDataParallel(net, devices, torch.optim.AdamW, lr=..., fused=True)``;
* ``graphs``: ``loss = model.train_step(x, y, loss_fn=F)`` with ``graphs=True`` (``capturable=True``);
* ``dp``: ``loss = F(model(x), y)`` with ``model = nn.DataParallel(net, device_ids)``, the batch moved to the
  first device, autocast inside the model's forward (DataParallel's threads do not inherit the caller's bf16,
  as PyTorch's AMP notes say), one AdamW on the first device.

Every side computes its loss straight from the forward's result, so no side holds its outputs across
``backward()`` (a GPT-124M's bf16 logits, 16 x 1024 x 50304, are 1.5 GiB: a loop that keeps ``out = model(x)``
alive through backward peaks that much higher, whatever the wrapper; the first H200 run wrote the eager and dp
loops so and charged it to them).

**Part 1, one device** (``[cuda:0]``): plain, eager, graphs and dp, interleaved — one block per side per
round, the side order rotated each round, each side built afresh in its block and freed after it.  Step time
is the window mean (host clock between two synchronizes over the timed steps, the same for every side);
peak memory is the block's own: ``torch.cuda.max_memory_allocated`` from before the side is built to the end
of its block, less what was allocated when the block began.  Before each block everything the previous one
made is freed, cuBLAS's per-stream workspaces included (``torch._C._cuda_clearCublasWorkspaces``): cuBLAS keeps
one for every stream it has run on until told.  The first H200 run cleared nothing: every block after a graphs
block peaked 0.127 GiB higher per graphs block before it (plain 14.51, 14.77, 14.89 GiB), while the graphs
themselves were freed — the workspaces of the fresh streams each capture ran on, as far as the table shows.
Targets: eager <= 1.02x plain's step time and <= 1.03x its peak memory (the ratio of each round, median
over rounds).

**Part 2, the repeated device** (``cuda:0`` x n; one GPU is what there is): eager, graphs and dp,
interleaved the same way.  Every replica shares the one GPU, so **only host costs mean anything here**:
step and GPU times are n replicas' work on one device and say nothing about speed on n GPUs.  Per
replica-step (per step / n), the median over the timed steps of three clocks, cycled step by step:

* **host** — the host clock around one step started from an idle device;
* **launch** — the same, with the device synchronised before every host phase of the step (the loop's
  forward with its loss, backward and optimizer; the library's ``host_phase`` hook inside them — the
  all-reduce launches, the batch's load, each replica's graph replay; DataParallel's scatter, replicate,
  parallel_apply and gather, its loss outside them) and
  the time spent in those synchronisations subtracted: each phase starts from an empty launch queue, as
  each replica's launches would on a GPU of its own, and what remains is Python and launching, every
  launch and all-reduce included (the method of ``benchmarks/train_graphs.py``); each block's line under the
  table splits it by phase (exclusive of nested phases; "outside" is the step's host time in no phase);
* **GPU** — CUDA events around the step, queued behind a sleep kernel that outlasts the host's enqueue time,
  so that the device never waits for the host.

Targets: eager's launch time per replica-step <= DataParallel's; graphs' launch time per replica-step <=
1/32 of its GPU time per replica-step.  Losses: every side is compared step by step with plain (part 1) or
dp (part 2, the same global batch) within the precision's tolerance (bf16 autocast 3e-2, fp32 1e-5).

On CPU (``--device cpu``, gpt-tiny) it runs in CI size for the smoke test: plain and eager only (no graphs,
no DataParallel), no memory, CPU numbers.  Writes ``parallel-vs-dataparallel_<hardware>_<date>.txt`` (the
tables, the summary with each target met or missed, the command) to ``--out`` (default ``$OUT``, else
``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as dt
import gc
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gpucomm.parallel import GraphCaptureError, ReplicatedDataParallel
from gpucomm.train.models import load_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared clock beside this script, also when imported
from _clock import SleepClock

TARGETS = {"time": 1.02, "memory": 1.03, "eager_vs_dp": 1.0, "graphs_launch_over_gpu": 1 / 32}
TOLERANCE = {"bf16": 3e-2, "fp32": 1e-5}
_NULL = contextlib.nullcontext()


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cuda = torch.cuda.is_available()
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if cuda else "cpu",
                   help="device type; every replica goes on device 0 of it (default: cuda when available)")
    p.add_argument("--model", default=None, help="built-in model (default gpt-124m on cuda, gpt-tiny on cpu)")
    p.add_argument("--batch", type=int, default=None, help="samples per replica (default 16 on cuda, 4 on cpu)")
    p.add_argument("--replicas", type=int, default=2, help="replicas on the repeated device in part 2 (default 2)")
    p.add_argument("--steps", type=int, default=12, help="timed steps per block (default 12)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per block (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of one block per side (default 3)")
    p.add_argument("--hardware", default=None, help="hardware label in the file name (default: from the device)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: $OUT, else benchmarks/results)")
    args = p.parse_args(argv)
    for name in ("batch", "steps", "rounds"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name}: expected an integer >= 1, but got {getattr(args, name)}")
    if args.replicas < 2:
        p.error(f"--replicas: expected an integer >= 2 (part 2 repeats the device), but got {args.replicas}")
    if args.warmup < 1:
        p.error(f"--warmup: expected an integer >= 1 (the first step allocates), but got {args.warmup}")
    if args.device == "cuda" and not cuda:
        p.error("--device cuda: CUDA is not available here; use --device cpu (the CPU smoke form)")
    args.model = args.model or ("gpt-124m" if args.device == "cuda" else "gpt-tiny")
    args.batch = args.batch or (16 if args.device == "cuda" else 4)
    return args


# ----- the loops, as users write them --------------------------------------------------------------------
class _AutocastForward(nn.Module):
    """The model with bf16 autocast inside its forward: how DataParallel users must write it."""

    def __init__(self, module: nn.Module, enabled: bool) -> None:
        super().__init__()
        self.module, self.enabled = module, enabled

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.enabled):
            return self.module(x)


class Loop:
    """One side's training loop on its devices; ``step(x, y, phase)`` runs one step, ``phase(name)`` around
    each host phase (a no-op unless a clock asks)."""

    def __init__(self, side: str, net: nn.Module, devices: list[torch.device], loss_fn: Callable, cuda: bool) -> None:
        self.side, self.devices, self.loss_fn, self.cuda = side, devices, loss_fn, cuda
        first = devices[0]
        net = net.to(first)
        self.autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else _NULL
        if side == "plain":
            self.model, self.opt = net, torch.optim.AdamW(net.parameters(), lr=3e-4, fused=cuda)
        elif side in ("eager", "graphs"):
            graphs = side == "graphs"
            self.model = ReplicatedDataParallel(net, devices, torch.optim.AdamW, lr=3e-4, fused=cuda,
                                                capturable=graphs, graphs=graphs)
        else:
            self.phase: Callable[[str], Any] = lambda name: _NULL
            self.model = _phased(nn.DataParallel(_AutocastForward(net, cuda), device_ids=[d.index for d in devices],
                                                 output_device=first.index), self)
            self.opt = torch.optim.AdamW(net.parameters(), lr=3e-4, fused=cuda)

    def step(self, x: torch.Tensor, y: torch.Tensor, phase: Callable[[str], Any] = lambda name: _NULL) -> Any:
        side, dev = self.side, self.devices[0]
        if side == "graphs":
            self.model.host_phase = phase
            with self.autocast:
                return self.model.train_step(x, y, loss_fn=self.loss_fn)
        if side == "eager":
            self.model.host_phase = phase
            with phase("forward"), self.autocast:
                loss = self.model.loss(self.loss_fn, self.model(x), y)
            opt = self.model.optimizer
        elif side == "plain":
            with phase("forward"):
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                with self.autocast:
                    loss = self.loss_fn(self.model(x), y)
            opt = self.opt
        else:  # dp: the batch to the first device, DataParallel scatters it from there
            self.phase = phase
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            with self.autocast:  # the loss, after DataParallel's own phases (scatter ... gather)
                loss = self.loss_fn(self.model(x), y)
            opt = self.opt
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            opt.step()
            opt.zero_grad()
        return loss.detach()


def _phased(dp: nn.DataParallel, loop: Loop) -> nn.DataParallel:
    """DataParallel whose four forward phases (its own methods, unchanged) run inside ``loop.phase``."""
    for name in ("scatter", "replicate", "parallel_apply", "gather"):
        setattr(dp, name, _in_phase(getattr(dp, name), name, loop))  # DataParallel.forward calls self.<name>
    return dp


def _in_phase(method: Callable, name: str, loop: Loop) -> Callable:
    def timed(*a: Any, **k: Any) -> Any:
        with loop.phase(name):
            return method(*a, **k)
    return timed


# ----- clocks ----------------------------------------------------------------------------------------------
class Clock(SleepClock):
    """Window, host, launch and GPU timing of steps (see the module notes)."""

    def host(self, loop: Loop, x: Any, y: Any) -> tuple[float, Any]:
        self.sync()
        t0 = time.perf_counter()
        loss = loop.step(x, y)
        host = (time.perf_counter() - t0) * 1e3
        self.sync()
        return host, loss

    def launch(self, loop: Loop, x: Any, y: Any) -> tuple[float, dict[str, float], Any]:
        """The step's host time with the device synchronised before every host phase, minus those syncs; and
        that time by phase (ms, each phase exclusive of the phases nested in it; "outside": in none)."""
        self.sync()
        waited = 0.0
        phases: dict[str, float] = {}
        open_: list[list] = []  # [name, resumed at]: the phases entered and not left, innermost last

        @contextlib.contextmanager
        def from_idle(name: str) -> Iterator[None]:
            nonlocal waited
            t = time.perf_counter()
            if open_:
                phases[open_[-1][0]] = phases.get(open_[-1][0], 0.0) + t - open_[-1][1]
            self.sync()
            start = time.perf_counter()
            waited += start - t
            open_.append([name, start])
            try:
                yield
            finally:
                end = time.perf_counter()
                phases[name] = phases.get(name, 0.0) + end - open_.pop()[1]
                if open_:
                    open_[-1][1] = end

        t0 = time.perf_counter()
        loss = loop.step(x, y, from_idle)
        launch = (time.perf_counter() - t0 - waited) * 1e3
        self.sync()
        by_phase = {k: v * 1e3 for k, v in phases.items()}
        by_phase["outside"] = launch - sum(by_phase.values())
        return launch, by_phase, loss

    def gpu(self, loop: Loop, x: Any, y: Any, host_ms: float) -> tuple[float | None, Any]:
        if not self.cuda:
            return None, loop.step(x, y)
        return self.behind_sleep(lambda: loop.step(x, y), host_ms)


# ----- the two parts -------------------------------------------------------------------------------------
def _fresh(cuda: bool) -> int:
    """Free what earlier blocks made (cuBLAS's per-stream workspaces too: module notes), reset the peak, and
    return the bytes still allocated (the block's baseline)."""
    gc.collect()
    if not cuda:
        return 0
    torch.cuda.synchronize()
    if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):
        torch._C._cuda_clearCublasWorkspaces()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def _rotated(sides: list[str], rnd: int) -> list[str]:
    k = rnd % len(sides)
    return sides[k:] + sides[:k]


def _max_rel(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b, strict=True))


def _one_device(args, net, batches, loss_fn, clock: Clock, emit) -> dict[str, list[dict]]:
    cuda = clock.cuda
    device = torch.device("cuda:0" if cuda else "cpu")
    sides = ["plain", "eager", "graphs", "dp"] if cuda else ["plain", "eager"]
    emit(f"{'round':>5} {'side':<7} {'mean_ms':>9} {'peak_GiB':>9} {'loss_rel':>9}")
    blocks: dict[str, list[dict]] = {s: [] for s in sides}
    for rnd in range(args.rounds):
        reference = None
        for side in _rotated(sides, rnd):
            baseline = _fresh(cuda)
            try:
                loop = Loop(side, copy.deepcopy(net), [device], loss_fn, cuda)
                losses = [loop.step(x, y) for x, y in batches[:args.warmup]]
                clock.sync()
                t0 = time.perf_counter()
                losses += [loop.step(x, y) for x, y in batches[args.warmup:]]
                clock.sync()
                mean = (time.perf_counter() - t0) * 1e3 / args.steps
            except (GraphCaptureError, torch.cuda.OutOfMemoryError) as exc:
                emit(f"{rnd:>5} {side:<7} failed: {str(exc).splitlines()[0]}")
                continue
            peak = torch.cuda.max_memory_allocated() - baseline if cuda else None
            values = [float(v) for v in losses]
            del loop, losses
            block = {"round": rnd, "mean_ms": mean, "peak_bytes": peak, "losses": values}
            blocks[side].append(block)
            if side == "plain":
                reference = values
            rel = None if reference is None or side == "plain" else _max_rel(values, reference)
            gib = None if peak is None else peak / 2**30
            emit(f"{rnd:>5} {side:<7} {mean:>9.3f} {_fmt(gib, '.3f') if cuda else 'n/a':>9} {_fmt(rel, '.2e'):>9}")
    _compare_losses(blocks, "plain")  # also the sides that ran before plain in their round
    return blocks


def _repeated(args, net, batches, loss_fn, clock: Clock, emit) -> dict[str, list[dict]]:
    cuda, n = clock.cuda, args.replicas
    device = torch.device("cuda:0" if cuda else "cpu")
    sides = ["dp", "eager", "graphs"] if cuda else ["eager"]
    emit(f"{'round':>5} {'side':<7} {'host_ms':>9} {'launch_ms':>9} {'gpu_ms':>9} {'launch/gpu':>10} "
         f"{'loss_rel':>9}   (per replica-step; {n} replicas on one device)")
    blocks: dict[str, list[dict]] = {s: [] for s in sides}
    for rnd in range(args.rounds):
        for side in _rotated(sides, rnd):
            _fresh(cuda)
            try:
                loop = Loop(side, copy.deepcopy(net), [device] * n, loss_fn, cuda)
                losses = [loop.step(x, y) for x, y in batches[:args.warmup]]
                host, launch, gpu, phases = [], [], [], []
                for i, (x, y) in enumerate(batches[args.warmup:]):
                    kind = i % 3 if cuda else i % 2  # CPU: host and launch (no GPU clock)
                    if kind == 0:
                        t, loss = clock.host(loop, x, y)
                        host.append(t / n)
                    elif kind == 1:
                        t, by_phase, loss = clock.launch(loop, x, y)
                        launch.append(t / n)
                        phases.append({k: v / n for k, v in by_phase.items()})
                    else:
                        t, loss = clock.gpu(loop, x, y, statistics.median(host) * n if host else 50.0)
                        gpu.append(t / n)
                    losses.append(loss)
            except (GraphCaptureError, torch.cuda.OutOfMemoryError) as exc:
                emit(f"{rnd:>5} {side:<7} failed: {str(exc).splitlines()[0]}")
                continue
            values = [float(v) for v in losses]
            del loop, losses
            med = {k: statistics.median(v) if v else None for k, v in (("host", host), ("launch", launch),
                                                                        ("gpu", gpu))}
            block = {"round": rnd, **{f"{k}_ms": v for k, v in med.items()}, "losses": values,
                     "phases": {k: statistics.median(p.get(k, 0.0) for p in phases)
                                for k in dict.fromkeys(k for p in phases for k in p)}}
            blocks[side].append(block)
            ratio = med["launch"] / med["gpu"] if med["launch"] and med["gpu"] else None
            ref = next((b for b in blocks.get("dp", []) if b["round"] == rnd), None)
            rel = _max_rel(values, ref["losses"]) if ref and side != "dp" else None
            emit(f"{rnd:>5} {side:<7} {_ms(med['host'])} {_ms(med['launch'])} {_ms(med['gpu'])} "
                 f"{_fmt(ratio, '.4f'):>10} {_fmt(rel, '.2e'):>9}")
    for side, bs in blocks.items():
        for b in bs:
            emit(f"# round {b['round']} {side}: launch ms per replica-step by phase (medians): "
                 + ", ".join(f"{k} {v:.3f}" for k, v in b["phases"].items()))
    _compare_losses(blocks, "dp")
    return blocks


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _compare_losses(blocks: dict[str, list[dict]], base: str) -> None:
    """Each block's worst step-wise relative loss difference from ``base``'s block of the same round."""
    for side, bs in blocks.items():
        for b in bs:
            ref = next((r for r in blocks.get(base, []) if r["round"] == b["round"]), None)
            b["loss_rel"] = _max_rel(b["losses"], ref["losses"]) if ref and side != base else None


def _ms(v: float | None) -> str:
    return f"{'-' if v is None else f'{v:.3f}':>9}"


def _median_ratio(blocks: dict[str, list[dict]], side: str, base: str, key: str) -> float | None:
    """The median over rounds of side/base for ``key`` (each round's ratio to the same round's base)."""
    out = []
    for b in blocks.get(side, []):
        ref = next((r for r in blocks.get(base, []) if r["round"] == b["round"]), None)
        if ref and b.get(key) and ref.get(key):
            out.append(b[key] / ref[key])
    return statistics.median(out) if out else None


def _verdict(value: float | None, target: float, what: str) -> str:
    if value is None:
        return f"{what}: not measured here"
    return f"{what}: {value:.4f} (target <= {target:.4f}) {'met' if value <= target else 'MISSED'}"


def _summary(one: dict, rep: dict, tol: float, emit) -> list[str]:
    lines = ["# summary (medians over rounds of each round's ratio)"]
    lines.append(_verdict(_median_ratio(one, "eager", "plain", "mean_ms"), TARGETS["time"],
                          "one device: eager / plain step time"))
    lines.append(_verdict(_median_ratio(one, "eager", "plain", "peak_bytes"), TARGETS["memory"],
                          "one device: eager / plain peak memory"))
    for side in ("graphs", "dp"):
        for key, what in (("mean_ms", "step time"), ("peak_bytes", "peak memory")):
            r = _median_ratio(one, side, "plain", key)
            if r is not None:
                lines.append(f"one device: {side} / plain {what}: {r:.4f} (no target)")
    lines.append(_verdict(_median_ratio(rep, "eager", "dp", "launch_ms"), TARGETS["eager_vs_dp"],
                          "repeated device: eager / dp launch time per replica-step"))
    host = _median_ratio(rep, "eager", "dp", "host_ms")
    if host is not None:
        lines.append(f"repeated device: eager / dp host time per replica-step from an idle device: {host:.4f} "
                     f"(includes waiting for the shared GPU's queue)")
    graphs = [b["launch_ms"] / b["gpu_ms"] for b in rep.get("graphs", []) if b.get("launch_ms") and b.get("gpu_ms")]
    lines.append(_verdict(statistics.median(graphs) if graphs else None, TARGETS["graphs_launch_over_gpu"],
                          "repeated device: graphs launch / GPU time per replica-step"))
    rels = [b["loss_rel"] for part in (one, rep) for side, bs in part.items() for b in bs
            if b.get("loss_rel") is not None]
    worst = max(rels) if rels else None
    lines.append("losses: " + ("not compared" if worst is None else
                               f"worst step-wise relative difference {worst:.2e} (tolerance {tol:g}) "
                               f"{'equal' if worst <= tol else 'DIFFER'}"))
    for line in lines:
        emit(line)
    return lines


def _hardware(args) -> str:
    if args.hardware:
        return args.hardware
    if args.device == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name(0)
    short = "h200" if "H200" in name else "".join(c for c in name.lower() if c.isalnum())[:16]
    return f"{short}x{torch.cuda.device_count()}"


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    cuda = args.device == "cuda"
    out = args.out or Path(os.environ.get("OUT") or Path(__file__).resolve().parent / "results")
    lines: list[str] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    workload = load_workload(args.model, seed=0)
    net = workload.build_model()
    steps = args.warmup + args.steps
    pinned = (lambda t: t.pin_memory()) if cuda else (lambda t: t)
    one_batches = [tuple(map(pinned, workload.batch_fn(0, s, args.batch))) for s in range(steps)]
    rep_batches = [tuple(map(pinned, workload.batch_fn(0, s, args.batch * args.replicas))) for s in range(steps)]
    precision = "bf16" if cuda else "fp32"
    command = "python benchmarks/parallel_vs_dataparallel.py" + "".join(f" {shlex.quote(a)}"
                                                                          for a in (argv or sys.argv[1:]))
    emit(f"# parallel-vs-dataparallel: a user's loop under ReplicatedDataParallel (eager, graphs), nn.DataParallel "
         f"and plain ({_hardware(args)})")
    emit(f"# command: {command}")
    emit(f"# date {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}; "
         f"{torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine()}; "
         f"python {platform.python_version()}; torch {torch.__version__}; "
         f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE', 'unset')}")
    emit(f"# model {args.model} (seq {workload.seq_len}), {args.batch} samples per replica, {precision}, AdamW "
         f"{'fused' if cuda else ''} lr 3e-4; {args.warmup} warmup + {args.steps} timed steps per block; "
         f"{args.rounds} rounds, side order rotated each round")
    if not cuda:
        emit("# CPU numbers (the smoke form): no graphs, no DataParallel, no memory; they say nothing about a GPU")
    emit("## part 1: one device; mean_ms = window / steps, peak = max_memory_allocated of the block less what was "
         "allocated when it began (blocks start from freed memory and cleared cuBLAS workspaces), loss_rel = "
         "worst step-wise relative difference from plain in the same round")
    clock = Clock(cuda)
    one = _one_device(args, net, one_batches, workload.loss_fn, clock, emit)
    emit(f"## part 2: {args.replicas} replicas on the one device, per replica-step: ONLY HOST COSTS ARE MEANINGFUL "
         f"HERE (the replicas share one GPU); loss_rel = from dp on the same global batch")
    rep = _repeated(args, net, rep_batches, workload.loss_fn, clock, emit)
    _summary(one, rep, TOLERANCE[precision], emit)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"parallel-vs-dataparallel_{_hardware(args)}_{dt.datetime.now(dt.timezone.utc):%Y-%m-%d}.txt"
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
