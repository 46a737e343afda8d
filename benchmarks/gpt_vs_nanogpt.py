"""Is ``gpucomm train``'s built-in GPT the GPT people compare with?  Its step against a nanoGPT-style loop.

Two sides, same shape (the built-in model's: GPT-124M is 12 x 768, 12 heads, vocabulary 50304, context
1024), same data (the built-in workload's batches, pinned before the first step), interleaved in one
process (one block of steps per side per round, the order swapped every round):

* **builtin** — ``gpucomm train --strategies single`` exactly: :func:`gpucomm.train.loop.run_strategy` with
  the ``single`` strategy on :func:`gpucomm.train.models.load_workload` (bf16 autocast on CUDA, fused AdamW,
  ``zero_grad(set_to_none=True)``);
* **nanogpt** — a GPT written here the way Karpathy's nanoGPT ``model.py`` writes it (``c_attn``/``c_proj``
  attention through ``scaled_dot_product_attention(is_causal=True)``, ``c_fc``/GELU/``c_proj`` MLP,
  LayerNorm with bias, the head tied to ``wte``, GPT-2's initialisation, dropout 0, and the loss inside
  ``forward``: ``F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)``), trained by
  nanoGPT ``train.py``'s inner loop without gradient accumulation, clipping or a GradScaler (none
  applies to one bf16 step): ``with autocast: _, loss = model(X, Y)``; ``loss.backward()``;
  ``optimizer.step()``; ``optimizer.zero_grad(set_to_none=True)``, with nanoGPT's fused AdamW (weight
  decay 0.1 on matrices, 0 elsewhere, betas 0.9/0.95).  The loop does not keep the logits (train.py's
  ``logits`` variable keeps them until the next forward: 2 bytes per logit that belong to that script,
  not to the model).  TF32 is left off on both sides: under bf16 autocast every matmul is bf16.

Before timing, the two models are checked to compute the same function: one set of weights goes into
both and their fp32 logits on the first batch must agree to 1e-5 (:func:`same_function`).

Per block: ``--warmup`` untimed steps, then ``--steps`` timed ones.  Step time = the median over timed
steps of the interval between consecutive step ends (CUDA events on every side: the cadence at which
steps complete; the host clock on CPU), and the mean (host clock between two synchronizes / steps).
Peak memory = ``torch.cuda.max_memory_allocated`` from before the model is built to the end of the
block.  Printed: every block, then the median over rounds of each round's builtin/nanogpt ratio, for
time and memory, against the target 1.02x.

Usage::

    python benchmarks/gpt_vs_nanogpt.py                     # CUDA: gpt-124m 16x1024 bf16; CPU: gpt-tiny
    python benchmarks/gpt_vs_nanogpt.py --device cpu --model gpt-tiny --batch 4 --steps 2 --rounds 2
    PYTHONPATH=src python benchmarks/gpt_vs_nanogpt.py --out "$OUT/gpt-vs-nanogpt_h200x1_$(date -u +%F).txt"
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
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
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the device helpers of train_vs_plain, shared
from train_vs_plain import _batches, _fresh, _hardware, _sync

SIDES = ("builtin", "nanogpt")
TARGET = 1.02


# ----- the nanoGPT-style model (written from nanoGPT's model.py's structure) --------------------------------
class _SelfAttention(nn.Module):
    def __init__(self, d: int, n_head: int) -> None:
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.n_head = n_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.size()
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class _MLP(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.c_fc, self.gelu, self.c_proj = nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class _Block(nn.Module):
    def __init__(self, d: int, n_head: int, hidden: int) -> None:
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d), _SelfAttention(d, n_head)
        self.ln_2, self.mlp = nn.LayerNorm(d), _MLP(d, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's GPT at the built-in model's shape; ``forward(idx, targets) -> (logits, loss)``."""

    def __init__(self, cfg) -> None:
        super().__init__()
        d = cfg.d_model
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab, d), wpe=nn.Embedding(cfg.seq_len, d),
            h=nn.ModuleList(_Block(d, cfg.n_head, cfg.ffn_hidden) for _ in range(cfg.n_layer)),
            ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, cfg.vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def nanogpt_optimizer(model: nn.Module, lr: float, cuda: bool) -> torch.optim.Optimizer:
    """nanoGPT's ``configure_optimizers``: decay matrices and embeddings, not biases and norms."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=cuda)


_PREFIXES = (("wte.", "transformer.wte."), ("wpe.", "transformer.wpe."), ("ln_f.", "transformer.ln_f."),
             ("blocks.", "transformer.h."))
_PARTS = ((".qkv.", ".attn.c_attn."), (".attn_proj.", ".attn.c_proj."), (".fc.", ".mlp.c_fc."),
          (".mlp_proj.", ".mlp.c_proj."))


def nanogpt_state(builtin_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The built-in GPT's parameters under nanoGPT's names (so both models can be run on one set of weights)."""
    out = {}
    for name, value in builtin_state.items():
        for old, new in _PREFIXES:
            if name.startswith(old):
                name = new + name[len(old):]
        for old, new in _PARTS:
            name = name.replace(old, new)
        out[name] = value
    return out


def same_function(workload, cfg, batch: int, device: torch.device | str = "cpu") -> float:
    """Largest relative logit difference of the two models in fp32 on ``device``, on one set of weights.

    The weights are drawn N(0, 0.3) — not the small initialisation, under which every pre-activation is
    near 0 and a different GELU or a missing bias would hardly show — copied into both models, and both
    are run on the workload's first batch.
    """
    builtin = workload.build_model()
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        for p in builtin.parameters():
            p.normal_(0.0, 0.3)
    nano = NanoGPT(cfg)
    nano.load_state_dict(nanogpt_state(builtin.state_dict()))  # strict: every name and shape must match
    builtin, nano = builtin.to(device), nano.to(device)
    x, y = (t.to(device) for t in workload.batch_fn(0, 0, batch))
    with torch.no_grad():
        a, b = builtin(x), nano(x, y)[0]
    return float((a - b).abs().max() / a.abs().max())


# ----- measuring ------------------------------------------------------------------------------------------------
@dataclass
class Block:
    side: str
    round: int
    median_ms: float
    mean_ms: float
    peak_bytes: int | None


def _peak(device: torch.device) -> int | None:
    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None


def nanogpt_block(workload, cfg, device: torch.device, batch: int, warmup: int, steps: int, lr: float,
                  rnd: int) -> Block:
    """nanoGPT train.py's inner loop (see the module docstring), timed by step-end events."""
    cuda = device.type == "cuda"
    batches = _batches(workload, warmup + steps, batch, device)
    _fresh(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = NanoGPT(cfg).to(device)
    optimizer = nanogpt_optimizer(model, lr, cuda)
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)] if cuda else []
    host: list[float] = []
    t0 = 0.0
    for i, (x, y) in enumerate(batches):
        if i == warmup:
            _sync(device)
            t0 = time.perf_counter()
            host.append(t0)
            if cuda:
                ends[0].record()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with ctx:
            _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if i >= warmup:
            if cuda:
                ends[i - warmup + 1].record()
            else:
                host.append(time.perf_counter())
    _sync(device)
    mean = (time.perf_counter() - t0) * 1e3 / steps
    if cuda:
        intervals = [a.elapsed_time(b) for a, b in zip(ends, ends[1:], strict=False)]
    else:
        intervals = [(b - a) * 1e3 for a, b in zip(host, host[1:], strict=False)]
    peak = _peak(device)
    del model, optimizer, loss, batches
    return Block(side="nanogpt", round=rnd, median_ms=statistics.median(intervals), mean_ms=mean, peak_bytes=peak)


def builtin_block(config, workload, device: torch.device, rnd: int) -> Block:
    """``gpucomm train --strategies single``: the loop and strategy it runs, nothing else."""
    from gpucomm.train.loop import run_strategy
    from gpucomm.train.strategies import SingleStrategy

    _fresh(device)
    result = run_strategy(SingleStrategy(config, [device]), workload, config)
    timed = result.step_ms[config.warmup_steps:]
    return Block(side="builtin", round=rnd, median_ms=statistics.median(timed),
                 mean_ms=result.window_ms / len(timed), peak_bytes=_peak(device))


def _ratios(blocks: list[Block], attr: str) -> list[float]:
    out = []
    for rnd in sorted({b.round for b in blocks}):
        by = {b.side: getattr(b, attr) for b in blocks if b.round == rnd}
        if by.get("builtin") is not None and by.get("nanogpt"):
            out.append(by["builtin"] / by["nanogpt"])
    return out


def run(args: argparse.Namespace, emit: Callable[[str], None]) -> dict[str, float]:
    from gpucomm import models as shapes
    from gpucomm.train.config import TrainConfig
    from gpucomm.train.models import GPTConfig, load_workload

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    model = args.model or ("gpt-124m" if cuda else "gpt-tiny")
    batch = args.batch or (16 if cuda else 4)
    workload = load_workload(model, seed=0, seq_len=args.seq_len)
    cfg = GPTConfig.from_architecture(shapes.get(model), args.seq_len)
    config = TrainConfig(strategies=("single",), model=model, steps=args.warmup + args.steps,
                         warmup_steps=args.warmup, global_batch=batch, seq_len=args.seq_len, devices=[device],
                         lr=args.lr, precision="auto")
    emit("# gpt_vs_nanogpt: gpucomm train's built-in GPT (its single strategy) against a nanoGPT-style loop, "
         "interleaved in one process")
    env = "".join(f"{k}={os.environ[k]} " for k in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES") if k in os.environ)
    emit(f"# command: {env}python {' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}")
    emit(f"# date: {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}; hardware: {_hardware(device)}; "
         f"python {platform.python_version()}; torch {torch.__version__}")
    emit(f"# model {model}: {cfg.n_layer} x {cfg.d_model}, {cfg.n_head} heads, vocabulary {cfg.vocab}, "
         f"sequence {cfg.seq_len}; batch {batch}; precision {config.resolved_precision()}; "
         f"{args.warmup} warmup + {args.steps} timed steps per block; {args.rounds} rounds, order swapped each round")
    diff = same_function(workload, cfg, min(batch, 2), device)
    _fresh(device)
    emit(f"# same function: fp32 logits on one batch, one set of N(0, 0.3) weights in both models: largest "
         f"relative difference {diff:.1e}")
    if diff > 1e-5:
        raise RuntimeError(f"the two models differ (relative logit difference {diff:.1e} > 1e-5)")
    if not cuda:
        emit("# CPU numbers: fp32, the host clock, no allocator statistics (memory n/a); a smoke test, not a "
             "measurement")
    emit("# median_ms: median over timed steps of step-end to step-end (CUDA events; host clock on CPU); "
         "mean_ms: host clock between two synchronizes / steps; peak_GiB: max_memory_allocated")
    emit(f"{'round':>5} {'side':<8} {'median_ms':>9} {'mean_ms':>9} {'peak_GiB':>9}")
    blocks: list[Block] = []
    for rnd in range(args.rounds):
        for side in (SIDES if rnd % 2 == 0 else SIDES[::-1]):
            if side == "builtin":
                b = builtin_block(config, workload, device, rnd)
            else:
                b = nanogpt_block(workload, cfg, device, batch, args.warmup, args.steps, args.lr, rnd)
            blocks.append(b)
            peak = "n/a" if b.peak_bytes is None else f"{b.peak_bytes / 2**30:.3f}"
            emit(f"{rnd:>5} {side:<8} {b.median_ms:>9.3f} {b.mean_ms:>9.3f} {peak:>9}")
    summary: dict[str, float] = {}
    emit("# summary: median over rounds of each round's builtin/nanogpt ratio")
    for label, attr in (("time", "median_ms"), ("mean time", "mean_ms"), ("memory", "peak_bytes")):
        ratios = _ratios(blocks, attr)
        if not ratios:
            emit(f"builtin/nanogpt {label}: n/a")
            continue
        summary[attr] = ratio = statistics.median(ratios)
        verdict = "within" if ratio <= TARGET else "ABOVE"
        emit(f"builtin/nanogpt {label} {ratio:.3f}x (rounds: {', '.join(f'{r:.3f}' for r in ratios)}); "
             f"{verdict} the target {TARGET}x")
    return summary


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu",
                   help="device to train on (default cuda:0, or cpu without a GPU)")
    p.add_argument("--model", default=None, help="built-in GPT (default gpt-124m on CUDA, gpt-tiny on CPU)")
    p.add_argument("--batch", type=int, default=None, help="samples per step (default 16 on CUDA, 4 on CPU)")
    p.add_argument("--seq-len", type=int, default=None, help="override the model's context length")
    p.add_argument("--steps", type=int, default=20, help="timed steps per block (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per block (default 3)")
    p.add_argument("--rounds", type=int, default=5, help="rounds of one block per side (default 5)")
    p.add_argument("--lr", type=float, default=6e-4, help="AdamW learning rate (default 6e-4, nanoGPT's)")
    p.add_argument("--out", type=Path, default=None, help="also write the output to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for flag, low in (("steps", 1), ("rounds", 1), ("warmup", 2)):
        if getattr(args, flag) < low:
            print(f"gpt_vs_nanogpt: --{flag}: expected >= {low}, but got {getattr(args, flag)}", file=sys.stderr)
            return 2
    if args.model is not None and not args.model.startswith("gpt-"):
        print(f"gpt_vs_nanogpt: --model: expected a built-in GPT (gpt-tiny, gpt-124m, gpt-350m), but got "
              f"{args.model!r}", file=sys.stderr)
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
    return status


if __name__ == "__main__":
    raise SystemExit(main())
