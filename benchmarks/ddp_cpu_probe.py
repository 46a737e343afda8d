"""Where does a ``ddp`` step's time go on CPU/gloo?  Measured from outside ``gpucomm.train``.

Runs the same model and per-rank batch that ``gpucomm train --strategies single,ddp`` runs, in four
forms, interleaved (A B C D A B C D ...) so that machine noise hits every form alike:

* ``alone``   — one process, no process group: what ``single`` at the per-rank batch measures;
* ``pair``    — two processes of plain training at the same time; no communication but a barrier before
  each step (every multi-process form has it, so that the ranks start a step together, as DDP's do);
* ``ddp``     — two processes under ``DistributedDataParallel`` (what ``ddp`` measures);
* ``nosync``  — the same DDP processes inside ``ddp.no_sync()`` (DDP's hooks run, no all-reduce);
* ``pair+ar`` — ``pair`` plus one synchronous ``all_reduce`` of all gradients flattened after backward
  (the all-reduce DDP does, without DDP), timed by itself in the ``ar`` column.

Each step is split with ``time.perf_counter`` into forward, backward (for DDP: until the all-reduce of
the gradients is done) and optimizer.  Also printed: torch threads per process and DDP's bucket
sizes.  Everything is a CPU number.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/ddp_cpu_probe.py --model gpt-tiny --batch 16 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch
import torch.distributed as td

from gpucomm.train.models import load_workload


def _steps(model_name: str, batch: int, steps: int, mode: str) -> dict:
    """Train ``steps`` steps; return per-phase median ms (after 5 warm-up steps)."""
    wl = load_workload(model_name, seed=0)
    model = wl.build_model()
    net = model
    buckets = None
    if mode in ("ddp", "nosync"):
        net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    phases: dict[str, list[float]] = {"fwd": [], "bwd": [], "ar": [], "opt": [], "step": []}
    for s in range(steps + 5):
        x, y = wl.batch_fn(0, s, batch)
        if mode != "alone":
            td.barrier()  # start together, as DDP ranks do after each all-reduce
        ctx = net.no_sync() if mode == "nosync" else contextlib.nullcontext()
        t0 = time.perf_counter()
        with ctx:
            loss = wl.loss_fn(net(x), y)
            t1 = time.perf_counter()
            loss.backward()
        t2 = ta = time.perf_counter()
        if mode == "pair+ar":
            grads = [p.grad for p in net.parameters() if p.grad is not None]
            flat = torch.cat([g.reshape(-1) for g in grads])
            td.all_reduce(flat)
            torch.split(flat, [g.numel() for g in grads])
            ta = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        t3 = time.perf_counter()
        if s >= 5:
            for k, v in zip(phases, (t1 - t0, t2 - t1, ta - t2, t3 - ta, t3 - t0), strict=True):
                phases[k].append(v * 1e3)
    if mode == "ddp":
        data = net._get_ddp_logging_data()
        buckets = data.get("bucket_sizes")
    out = {k: statistics.median(v) for k, v in phases.items()}
    out["threads"] = torch.get_num_threads()
    out["buckets"] = buckets
    return out


def _rank(model_name: str, batch: int, steps: int, mode: str) -> dict:
    return _steps(model_name, batch, steps, mode)


def main() -> int:
    from gpucomm.dist import launch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt-tiny")
    ap.add_argument("--batch", type=int, default=16, help="per-process batch")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="alone,pair,ddp,nosync,pair+ar")
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {}
    for _ in range(args.rounds):
        for mode in args.modes.split(","):
            if mode == "alone":
                r = _steps(args.model, args.batch, args.steps, mode)
            else:
                r = launch(_rank, 2, args.model, args.batch, args.steps, mode, backend="gloo")[0]
            rows.setdefault(mode, []).append(r)
    print(f"CPU numbers, model {args.model}, per-process batch {args.batch}, median ms per phase "
          f"(per round: min..max over {args.rounds} rounds)")
    print(f"{'mode':8} {'threads':>7} {'fwd':>14} {'bwd':>14} {'ar':>14} {'opt':>14} {'step':>14}  buckets")
    for mode, rs in rows.items():
        cells = []
        for k in ("fwd", "bwd", "ar", "opt", "step"):
            vals = [r[k] for r in rs]
            cells.append(f"{statistics.median(vals):6.2f} ({min(vals):.1f}-{max(vals):.1f})")
        print(f"{mode:8} {rs[0]['threads']:>7} " + " ".join(f"{c:>14}" for c in cells) + f"  {rs[0]['buckets']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
