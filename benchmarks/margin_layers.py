"""Does the caching allocator's margin grow with the layer count? Reserved minus allocated at a step's peak.

``gpucomm advise`` predicts a step's reserved memory as allocated plus the allocator's margin, measured on whole
two-layer steps of the compute profile (per byte of fp32 logits).  On the H200 single-GPU check a 48-layer
GPT under full checkpointing reserved 2.8 GiB beyond allocated where the two-layer steps predicted 0.4 GiB
(advisor-single-gpu-r5_h200x1_2026-12-04.txt: -12.1% of reserved).  This times nothing: it builds the profile's
own whole-step model (:class:`gpucomm.advisor.compute.modules.Stack`: embedding, layers, head with the fp32-upcast
loss, fused AdamW, bf16 autocast over fp32 weights) at several layer counts of one layer shape, runs three steps
each (the first creates Adam's states), and prints the peak allocated and reserved bytes of the third step and
their difference, per checkpointing mode — so that the margin's dependence on layers is read, not assumed.

Usage (one H200, about 30 s)::

    PYTHONPATH=src python benchmarks/margin_layers.py --out benchmarks/results/margin-layers_h200x1_DATE.txt
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from gpucomm.advisor.compute import modules  # noqa: E402
from gpucomm.advisor.compute.shapes import EmbeddingShape, HeadShape, LayerShape  # noqa: E402

GiB = 2**30
SHAPES = {  # the single-GPU check's two full-checkpointing misses' layer shapes, and one of the profile's
    "gpt h1600 4x2048 (gpt-1.5b)": (LayerShape(family="gpt", hidden=1600, heads=25, kv_heads=25, ffn=6400, seq=2048,
                                               mb=4), 50304),
    "llama h2560 2x4096 (llama-2.9b)": (LayerShape(family="llama", hidden=2560, heads=20, kv_heads=4, ffn=6912,
                                                   seq=4096, mb=2), 128256),
    "gpt h1536 4x4096 (profile step)": (LayerShape(family="gpt", hidden=1536, heads=24, kv_heads=24, ffn=6144,
                                                   seq=4096, mb=4), 50304),
}


def one(s: LayerShape, vocab: int, layers: int, ac: str, device: torch.device) -> tuple[int, int]:
    la = LayerShape(**{**s.key(), "ac": ac})
    emb = EmbeddingShape(vocab=vocab, hidden=s.hidden, seq=s.seq, mb=s.mb, positions=s.family == "gpt")
    head = HeadShape(family=s.family, vocab=vocab, hidden=s.hidden, seq=s.seq, mb=s.mb, loss="upcast")
    with device:
        model = modules.init_(modules.Stack(emb, [la] * layers, head))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    idx = torch.randint(0, vocab, (s.mb, s.seq), device=device)
    tgt = torch.randint(0, vocab, (s.mb, s.seq), device=device)
    for i in range(3):
        if i == 2:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(idx, tgt)
        loss.backward()
        opt.step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--layers", default="2,8,24,48")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("margin_layers: needs a CUDA GPU (the caching allocator's margin is what it reads)", file=sys.stderr)
        return 2
    counts = [int(n) for n in args.layers.split(",")]
    dev = torch.device("cuda:0")
    lines = ["# the caching allocator's margin (peak reserved - peak allocated) by layer count", "",
             "command: python benchmarks/margin_layers.py" + (f" --out {args.out}" if args.out else "")
             + (f" --layers {args.layers}" if args.layers != "2,8,24,48" else ""),
             f"date: {_dt.date.today()}; device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}",
             "model: gpucomm.advisor.compute.modules.Stack (the profile's whole steps), fp32 weights, bf16 autocast, "
             "fp32-upcast loss, fused AdamW; the third step's peaks, from an emptied cache per row", "",
             "| shape | ac | layers | allocated GiB | reserved GiB | margin GiB |", "|---|---|---:|---:|---:|---:|"]
    for name, (s, vocab) in SHAPES.items():
        for ac in ("none", "full"):
            for n in counts:
                torch.cuda.empty_cache()
                try:
                    a, r = one(s, vocab, n, ac, dev)
                    lines.append(f"| {name} | {ac} | {n} | {a / GiB:.2f} | {r / GiB:.2f} | {(r - a) / GiB:.2f} |")
                except torch.OutOfMemoryError:
                    lines.append(f"| {name} | {ac} | {n} | out of memory | | |")
                print(lines[-1], flush=True)
                torch.cuda.empty_cache()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
