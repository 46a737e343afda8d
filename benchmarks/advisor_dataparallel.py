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

from gpucomm import records
from gpucomm.advisor import calibrate, hardware
from gpucomm.advisor.plan import collective_s, dp_output_bytes, predict
from gpucomm.advisor.workload import make_workload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt-124m", help="a named-strategy model (default gpt-124m)")
    ap.add_argument("--global-batch", type=int, default=64, help="sequences per step (default 64)")
    ap.add_argument("--hardware", default="h200-nvswitch", help="profile (default h200-nvswitch)")
    ap.add_argument("--calibrate", nargs="+", default=[], metavar="DIR", help="train/bench records to calibrate")
    args = ap.parse_args(argv)
    prof = (calibrate.calibrate(records.load(*args.calibrate), args.hardware) if args.calibrate
            else hardware.get(args.hardware))
    wl = make_workload(args.model, global_batch=args.global_batch)
    p = wl.precision
    print(f"command: python benchmarks/advisor_dataparallel.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"model {wl.model} ({wl.params:,} parameters), global batch {wl.global_batch} x {wl.seq_len} tokens, "
          f"{p.name}, profile {prof.name}; predictions, milliseconds per step")
    print(f"outputs gathered to device 0 per step: {dp_output_bytes(wl) / 2**30:.2f} GiB of logits")
    print()
    print("| GPUs | broadcast weights | scatter inputs | gather logits | scatter logit grads | reduce grads "
          "| host | dp step | ddp step | dp / ddp |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes: list[str] = []
    for g in (2, 4, 8):
        parts = [collective_s(prof, "broadcast", wl.params * p.weight_bytes, g, 1, "local"),
                 collective_s(prof, "scatter", wl.global_batch * wl.tokens_per_sample * 8, g, 1, "local"),
                 collective_s(prof, "gather", dp_output_bytes(wl), g, 1, "local"),
                 collective_s(prof, "scatter", dp_output_bytes(wl), g, 1, "local"),
                 collective_s(prof, "reduce", wl.params * p.grad_bytes, g, 1, "local")]
        dp = predict("dp", prof, wl, gpus_per_node=g)
        ddp = predict("ddp", prof, wl, gpus_per_node=g)
        host = dp.overhead_s - dp.slowdown_s
        cells = " | ".join(f"{x * 1e3:.2f}" for x in [*parts, host])
        print(f"| {g} | {cells} | {dp.step_time_s * 1e3:.2f} | {ddp.step_time_s * 1e3:.2f} | "
              f"{dp.step_time_s / ddp.step_time_s:.2f} |")
        notes += [a for a in dp.assumptions if a not in notes]
    print()
    for a in notes:
        print(f"assumption: {a}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
