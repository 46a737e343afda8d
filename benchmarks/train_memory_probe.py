"""Does ``gpucomm train``'s loop keep anything alive that a plain loop does not?  Peak host memory on CPU.

Without a GPU there are no allocator statistics, but a harness that keeps logits, losses with their
graphs, gradients or batches alive holds the same extra tensors on the CPU as on a GPU.  Each side runs
in a fresh process (so one side's freed memory cannot hide the other's), alternating, and reports its
peak resident set size above the moment before the model is built (``getrusage`` ``ru_maxrss``):

* ``plain`` — model, AdamW, ``loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()``;
* ``gpucomm`` — :func:`gpucomm.train.loop.run_strategy` with ``single``, from ``--tree`` (default: this
  checkout's ``src``), e.g. an older commit exported with ``git archive <commit> src | tar -x -C DIR``.

The model is a 2-layer GPT with GPT-2's vocabulary (50304) at 4 x 512 tokens, so that a kept copy of the
logits (4 x 512 x 50304 fp32 = 393 MiB) would stand far above the noise.  CPU numbers, fp32.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/train_memory_probe.py --repeats 3 \\
        --out benchmarks/results/train-memory-probe_cpu_2026-12-03.txt
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import resource, sys
sys.path.insert(0, {tree!r})
import torch
from gpucomm.train.models import GPT, GPTConfig, Workload, gpt_batch, _lm_loss
torch.manual_seed(0)
shape = GPTConfig(n_layer=2, d_model=256, n_head=4, vocab=50304, seq_len=512)
wl = Workload(name="probe", build_model=lambda: GPT(shape), batch_fn=gpt_batch(50304, 512), loss_fn=_lm_loss,
              seq_len=512)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if {side!r} == "plain":
    model = wl.build_model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for s in range(4):
        x, y = wl.batch_fn(0, s, 4)
        loss = wl.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
else:
    from gpucomm.train.config import TrainConfig
    from gpucomm.train.loop import run_strategy
    from gpucomm.train.strategies.single import SingleStrategy
    cfg = TrainConfig(model="gpt-tiny", steps=4, warmup_steps=2, global_batch=4, devices=["cpu"])
    run_strategy(SingleStrategy(cfg, cfg.devices), wl, cfg)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""


def _measure(side: str, tree: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    out = subprocess.run([sys.executable, "-c", _CHILD.format(tree=str(tree), side=side)], capture_output=True,
                         text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, default=_ROOT / "src", help="the src directory whose gpucomm to probe")
    p.add_argument("--repeats", type=int, default=3, help="processes per side (default 3)")
    p.add_argument("--out", type=Path, default=None, help="also write the output to this file")
    args = p.parse_args(argv)
    if args.repeats < 1:
        print(f"train_memory_probe: --repeats: expected >= 1, but got {args.repeats}", file=sys.stderr)
        return 2
    lines = ["# train_memory_probe: peak RSS above the start, MiB, CPU, one fresh process per measurement",
             f"# command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')} python "
             f"{' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}",
             f"# gpucomm tree: {args.tree}",
             "# model: GPT 2 x 256, vocab 50304, batch 4 x 512, fp32 AdamW, 4 steps"]
    print("\n".join(lines), flush=True)
    results: dict[str, list[float]] = {"plain": [], "gpucomm": []}
    for r in range(args.repeats):
        for side in (("plain", "gpucomm") if r % 2 == 0 else ("gpucomm", "plain")):
            results[side].append(_measure(side, args.tree))
            line = f"{r:>3} {side:<8} {results[side][-1]:9.1f}"
            print(line, flush=True)
            lines.append(line)
    ratio = statistics.median(results["gpucomm"]) / statistics.median(results["plain"])
    line = (f"median: plain {statistics.median(results['plain']):.1f} MiB, gpucomm {statistics.median(results['gpucomm']):.1f}"
            f" MiB, ratio {ratio:.3f}x")
    print(line)
    lines.append(line)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
