"""DataParallel's gap to DDP, derived from its mechanics by the advisor's model: each part of its step.

torch.nn.DataParallel, per step and in this order, with nothing overlapping: replicate the module from
device 0 (a broadcast of the weights), scatter the inputs, run the replicas in threads, gather every
replica's outputs onto device 0 (for a GPT: the full ``batch x seq x vocab`` logits), scatter the outputs'
gradient back, run backward, reduce the gradients onto device 0 after the whole backward, step the optimizer
there, plus a host cost per device (Python threads under the GIL).  DDP overlaps its all-reduce with
backward.  This prints each part for GPT-124M on an H200 machine at 2, 4 and 8 GPUs, the predicted step
times and the ratio.  These are predictions (no GPU runs here); the host cost is the stated default unless
``--calibrate DIR`` points at ``gpucomm train`` records with ``host_ms_per_device``.

Usage::

    python benchmarks/advisor_dataparallel.py [--model gpt-124m] [--global-batch 64] [--calibrate DIR ...]
"""

from __future__ import annotations

import argparse
import sys

from gpucomm import models, records
from gpucomm.advisor import calibrate, hardware, search, timing, wrappers
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import preset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt-124m", help="a model preset (default gpt-124m)")
    ap.add_argument("--global-batch", type=int, default=64, help="sequences per step (default 64)")
    ap.add_argument("--hardware", default="h200-nvswitch", help="profile (default h200-nvswitch)")
    ap.add_argument("--calibrate", nargs="+", default=[], metavar="DIR", help="train/bench records to calibrate")
    args = ap.parse_args(argv)
    prof = (calibrate.calibrate(records.load(*args.calibrate), args.hardware) if args.calibrate
            else hardware.get(args.hardware))
    arch = models.get(args.model)
    print(f"command: python benchmarks/advisor_dataparallel.py {' '.join(sys.argv[1:] if argv is None else argv)}"
          .rstrip())
    print(f"model {arch.name} ({arch.params():,} parameters), global batch {args.global_batch} x {arch.seq} tokens, "
          f"bf16 autocast over fp32 weights, profile {prof.name}; predictions, milliseconds per step")
    logits = args.global_batch * arch.seq * arch.vocab * 2
    print(f"outputs gathered to device 0 per step: {logits / 2**30:.2f} GiB of logits")
    print()
    print("| GPUs | broadcast weights | scatter inputs | gather logits | scatter logit grads | reduce grads "
          "| host | dp step | ddp step | dp / ddp |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes: list[str] = []
    for g in (2, 4, 8):
        job = Job(arch=arch, profile=prof, nodes=1, gpus_per_node=g, global_batch=args.global_batch, seq=arch.seq)
        dp_layout = preset("dp", g, args.global_batch)
        parts = timing.dataparallel_parts(job, dp_layout)
        dp = search.evaluate(job, dp_layout).time
        ddp = search.evaluate(job, preset("ddp", g, args.global_batch)).time
        cost = wrappers.cost(prof, dp_layout)
        host = cost.per_device_s * g
        cells = " | ".join(f"{x * 1e3:.2f}" for x in [*parts.values(), host])
        print(f"| {g} | {cells} | {dp.step_s * 1e3:.2f} | {ddp.step_s * 1e3:.2f} | {dp.step_s / ddp.step_s:.2f} |")
        if cost.note and cost.note not in notes:
            notes.append(cost.note)
    print()
    for a in notes:
        print(f"assumption: {a}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
