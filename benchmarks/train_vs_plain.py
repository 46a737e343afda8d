"""Does ``gpucomm train`` measure what users run?  Its ``single`` and ``ddp`` against a plain PyTorch loop.

Three sides, on the same model, data, batch and optimizer, interleaved in one process (one block of
steps per side per round, the order rotated each round so that drift and position effects hit all
alike):

* **plain** — the loop people write (batches pinned beforehand, as ``DataLoader(pin_memory=True)``
  gives them)::

      model = build().to(dev); opt = torch.optim.AdamW(model.parameters(), lr, fused=cuda)
      for x, y in batches:
          x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
          with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
              loss = loss_fn(model(x), y)
          loss.backward()
          opt.step()
          opt.zero_grad()

* **single** — ``gpucomm.train``'s loop (:func:`gpucomm.train.loop.run_strategy`) with its ``single``
  strategy, exactly as ``gpucomm train --strategies single`` runs it;
* **ddp** — the same loop with ``ddp`` at world size 1 (``DistributedDataParallel`` on a world-of-one
  process group made in this process: gloo on CPU, NCCL on CUDA, rendezvous through an in-memory
  ``HashStore`` so nothing listens on a port).

Every side is timed the same way from outside: ``warmup`` untimed steps, a synchronize, the host clock
over ``steps`` steps, a synchronize — mean step time = window / steps (for single and ddp this is the
loop's own ``window_ms``; the loop's per-step CUDA-event median is printed next to it).  Peak memory is
``torch.cuda.max_memory_allocated`` from before the model is built to the end of the block (each side
is built afresh in every block and freed after it).  Printed: each block, then per side the median
over rounds of the per-round ratio to plain, for time and for memory.

Targets (issue 12, one H200, GPT-124M bf16 16x1024, fused AdamW, SDPA): single <= 1.02x time and
<= 1.03x memory; ddp <= 1.05x time.  On CPU (gpt-tiny) it runs in CI-sized form; its numbers are CPU
numbers (no allocator statistics: memory is "n/a").

Usage::

    python benchmarks/train_vs_plain.py                          # CUDA: gpt-124m 16x1024; CPU: gpt-tiny
    python benchmarks/train_vs_plain.py --model gpt-tiny --batch 8 --steps 10 --rounds 3
    PYTHONPATH=src python benchmarks/train_vs_plain.py --out "$OUT/train-vs-plain_h200x1_$(date +%F).txt"
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import os
import platform
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

_SIDES = ("plain", "single", "ddp")


@dataclass
class Block:
    side: str
    round: int
    mean_ms: float
    """Window / steps: host clock between two synchronizes."""
    median_ms: float | None = None
    """gpucomm's per-step median (CUDA events; the host clock on CPU); None for plain."""
    peak_bytes: int | None = None
    resident_bytes: int | None = None
    """Allocated after the last step (model, gradients if kept, optimizer state)."""
    host_ms: float | None = None
    gpu_ms: float | None = None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fresh(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> tuple[int | None, int | None]:
    if device.type != "cuda":
        return None, None
    return int(torch.cuda.max_memory_allocated(device)), int(torch.cuda.memory_allocated(device))


def _batches(workload, n: int, batch: int, device: torch.device) -> list:
    out = []
    for s in range(n):
        x, y = workload.batch_fn(0, s, batch)
        if device.type == "cuda":
            x, y = x.pin_memory(), y.pin_memory()
        out.append((x, y))
    return out


def plain(workload, device: torch.device, batch: int, warmup: int, steps: int, lr: float, rnd: int) -> Block:
    """The loop a user writes; timed from outside only."""
    cuda = device.type == "cuda"
    batches = _batches(workload, warmup + steps, batch, device)
    _fresh(device)
    model = workload.build_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=cuda)
    loss_fn = workload.loss_fn
    t0 = 0.0
    per_step: list[float] = []  # CPU only: there the host clock per step adds no wait
    for i, (x, y) in enumerate(batches):
        if i == warmup:
            _sync(device)
            t0 = time.perf_counter()
        if not cuda and i >= warmup:
            per_step.append(time.perf_counter())
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    _sync(device)
    t1 = time.perf_counter()
    mean = (t1 - t0) * 1e3 / steps
    peak, resident = _peak(device)
    del model, opt, loss, batches
    median = None
    if per_step:
        edges = [*per_step, t1]
        median = statistics.median((b - a) * 1e3 for a, b in zip(edges, edges[1:], strict=False))
    return Block(side="plain", round=rnd, mean_ms=mean, median_ms=median, peak_bytes=peak, resident_bytes=resident)


def _gpucomm(side: str, config, workload, device: torch.device, rnd: int) -> Block:
    from gpucomm.train.loop import run_strategy
    from gpucomm.train.strategies import DDPStrategy, SingleStrategy

    _fresh(device)
    if side == "single":
        strategy = SingleStrategy(config, [device])
    else:
        strategy = DDPStrategy(config, [device], rank=0, world_size=1)
    result = run_strategy(strategy, workload, config)
    peak, resident = _peak(device)
    del strategy
    timed = result.step_ms[config.warmup_steps:]
    return Block(side=side, round=rnd, mean_ms=result.window_ms / len(timed), median_ms=statistics.median(timed),
                 peak_bytes=peak, resident_bytes=resident,
                 host_ms=statistics.median(result.host_ms) if result.host_ms else None,
                 gpu_ms=statistics.median(result.gpu_ms) if result.gpu_ms else None)


def _world_of_one(device: torch.device) -> None:
    import torch.distributed as td

    if td.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    td.init_process_group(backend, store=td.HashStore(), rank=0, world_size=1,
                          device_id=device if device.type == "cuda" else None)


def _fmt_bytes(b: int | None) -> str:
    return "n/a" if b is None else f"{b / 2**30:.3f}"


def _fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ratios(blocks: list[Block], side: str, attr: str) -> list[float]:
    out = []
    for rnd in sorted({b.round for b in blocks}):
        base = next(b for b in blocks if b.round == rnd and b.side == "plain")
        other = next((b for b in blocks if b.round == rnd and b.side == side), None)
        a, p = (getattr(other, attr) if other else None), getattr(base, attr)
        if a is not None and p:
            out.append(a / p)
    return out


def _hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} threads)"


def run(args: argparse.Namespace, emit: Callable[[str], None]) -> dict[str, float]:
    from gpucomm.train.config import TrainConfig
    from gpucomm.train.models import load_workload

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    model = args.model or ("gpt-124m" if cuda else "gpt-tiny")
    batch = args.batch or (16 if cuda else 8)
    workload = load_workload(model, seed=0, seq_len=args.seq_len)
    config = TrainConfig(strategies=("single",), model=model, steps=args.warmup + args.steps,
                         warmup_steps=args.warmup, global_batch=batch, seq_len=args.seq_len, devices=[device],
                         lr=args.lr, precision="auto")
    sides = [s for s in _SIDES if s != "ddp" or args.ddp]
    if "ddp" in sides:
        _world_of_one(device)
    emit("# train_vs_plain: gpucomm train's single (and ddp at world size 1) against a plain PyTorch loop, "
         "interleaved in one process")
    env = "".join(f"{k}={os.environ[k]} " for k in ("OMP_NUM_THREADS", "NCCL_NVLS_ENABLE") if k in os.environ)
    emit(f"# command: {env}python {' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}")
    emit(f"# date: {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}; hardware: {_hardware(device)}; "
         f"python {platform.python_version()}; torch {torch.__version__}")
    emit(f"# model {model} (seq {workload.seq_len}), batch {batch}, precision {config.resolved_precision()}, "
         f"AdamW{' fused' if cuda else ''} lr {args.lr}; {args.warmup} warmup + {args.steps} timed steps per block; "
         f"{args.rounds} rounds; side order rotates each round")
    if not cuda:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        emit(f"# CPU numbers: no allocator statistics (memory n/a); the step time is the host clock; "
             f"load average {load:.1f} on {os.cpu_count()} cores at the start (a shared machine's noise "
             f"dwarfs a harness cost here)")
    emit("# mean_ms = window / steps (host clock between two synchronizes, the same for every side); "
         "median_ms = per-step median (gpucomm: CUDA events, host clock on CPU; plain: host clock on CPU only, "
         "since on CUDA a per-step reading would need a sync)")
    emit(f"{'round':>5} {'side':<7} {'mean_ms':>9} {'median_ms':>9} {'host_ms':>8} {'gpu_ms':>8} "
         f"{'peak_GiB':>9} {'resident_GiB':>12}")
    blocks: list[Block] = []
    for rnd in range(args.rounds):
        order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
        for side in order:
            if side == "plain":
                b = plain(workload, device, batch, args.warmup, args.steps, args.lr, rnd)
            else:
                b = _gpucomm(side, config, workload, device, rnd)
            blocks.append(b)
            emit(f"{rnd:>5} {side:<7} {b.mean_ms:>9.3f} {_fmt_ms(b.median_ms):>9} {_fmt_ms(b.host_ms):>8} "
                 f"{_fmt_ms(b.gpu_ms):>8} {_fmt_bytes(b.peak_bytes):>9} {_fmt_bytes(b.resident_bytes):>12}")
    summary: dict[str, float] = {}
    emit("# summary: median over rounds of each round's ratio to plain (same round)")
    targets = {"single": (1.02, 1.03), "ddp": (1.05, None)}
    for side in sides[1:]:
        t = _ratios(blocks, side, "mean_ms")
        med = _ratios(blocks, side, "median_ms")
        m = _ratios(blocks, side, "peak_bytes")
        tt, mt = targets[side]
        time_ratio = statistics.median(t)
        summary[f"{side}_time"] = time_ratio
        line = f"{side}/plain time {time_ratio:.3f}x (rounds: {', '.join(f'{r:.3f}' for r in t)}; target <= {tt})"
        if med:
            summary[f"{side}_time_median_steps"] = statistics.median(med)
            line += f"; per-step medians {statistics.median(med):.3f}x"
        if m:
            summary[f"{side}_memory"] = statistics.median(m)
            line += f"; memory {statistics.median(m):.3f}x" + (f" (target <= {mt})" if mt else "")
        else:
            line += "; memory n/a"
        emit(line)
    return summary


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu",
                   help="device to train on (default cuda:0, or cpu without a GPU)")
    p.add_argument("--model", default=None, help="built-in model (default gpt-124m on CUDA, gpt-tiny on CPU)")
    p.add_argument("--batch", type=int, default=None, help="samples per step (default 16 on CUDA, 8 on CPU)")
    p.add_argument("--seq-len", type=int, default=None, help="override the model's context length")
    p.add_argument("--steps", type=int, default=20, help="timed steps per block (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per block (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of one block per side (default 3)")
    p.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (default 3e-4)")
    p.add_argument("--no-ddp", dest="ddp", action="store_false", help="leave out the ddp side")
    p.add_argument("--out", type=Path, default=None,
                   help="also write the output to this file (e.g. benchmarks/results/train-vs-plain_cpu_DATE.txt)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for flag in ("steps", "rounds"):
        if getattr(args, flag) < 1:
            print(f"train_vs_plain: --{flag}: expected >= 1, but got {getattr(args, flag)}", file=sys.stderr)
            return 2
    if args.warmup < 2:
        print(f"train_vs_plain: --warmup: expected >= 2 (the loop's host probe needs two), but got {args.warmup}",
              file=sys.stderr)
        return 2
    lines: list[str] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)  # timeout(1) sends TERM: keep the blocks measured so far
    status = 0
    try:
        run(args, emit)
    except KeyboardInterrupt:
        emit("# interrupted: the blocks above are complete; no summary")
        status = 130
    finally:
        if args.out is not None and lines:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text("\n".join(lines) + "\n")
        import torch.distributed as td

        if td.is_initialized():
            td.destroy_process_group()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
