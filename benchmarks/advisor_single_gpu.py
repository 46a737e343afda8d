"""Check ``gpucomm advise`` against real training steps on one GPU: measured and predicted, side by side.

Trains thirteen models in the loop a user writes — their own GPT-2-style and Llama-style decoders written plainly
below (nanoGPT's ``Block``; Meta's Llama ``TransformerBlock`` with RMSNorm, rotary embeddings, ``repeat_kv``
and SwiGLU), fp32 weights under bf16 autocast, ``F.scaled_dot_product_attention``, fused AdamW,
``loss.backward()``, ``opt.step()``, ``opt.zero_grad(set_to_none=True)`` — 150 M to 2.9 B parameters,
sequences of 1,024 to 8,192 tokens, micro-batches 1 to 16, activation checkpointing none, full (every block
under ``torch.utils.checkpoint``) and op (torchtitan's per-op policy), the loss on fp32-upcast logits
(``F.cross_entropy(logits.float(), y)``) or on the bf16 logits under autocast.

Per case: warm-up steps, then timed steps with a CUDA event at the end of each (the host running ahead, as in
``gpucomm train``), the median interval; ``torch.cuda.max_memory_allocated`` and ``max_memory_reserved`` from a
reset after the model and optimizer are built (the first step creates Adam's states); memory freed between
cases.  The prediction comes through the advisor's CLI contract, one call per case::

    gpucomm advise --gpus 1 --hardware h200-nvswitch --arch layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,
        ffn_kind=..,vocab=..,seq=..,tied=..,dropout=0 --layout tp=1,pp=1,cp=1,dp=1,shard=none,mb=..,ac=..
        --global-batch MB --loss upcast|autocast --host profile|this --json

(``step_time_s``, ``memory_allocated_bytes``, ``memory_reserved_bytes`` of its first row).  ``--host this``
(this script's default where the cases run on a GPU: the steps run on this machine, so its host paces the
host-bound ones) prices a host-paced step with this machine's host instead of the profile's: the advisor times
the profile's host-paced whole op steps (2 and 8 layers) again on this GPU (five rounds; its assumption line says how long it took) and prices
this host's marginal time a layer.  That is
not calibration — it times none of the cases, only the profile's own points — and the script times the same
probe again after the cases, to show how far the host moved meanwhile.  The probe runs in a child process,
before the cases and after them, as a user runs ``gpucomm advise --host this`` apart from their training: it
reads busy times under ``torch.profiler``, and a finished profile can leave CUPTI attached to the process that
ran it (pytorch/pytorch#144455), which the cases' own steps must not carry.  The shapes are
chosen off the compute profile's grid (hidden sizes it does not measure, head dims 64/80/128, token counts that
are not powers of two), since the advisor is checked on shapes it has not seen.

Targets (issue 16, uncalibrated H200 profile): step time median |error| <= 5% and every case <= 10%; peak
reserved memory every case within 10%.  ``--check`` exits 1 when one is missed.

Usage::

    PYTHONPATH=src python benchmarks/advisor_single_gpu.py --out benchmarks/results/advisor-single-gpu_h200x1_DATE.txt
    python benchmarks/advisor_single_gpu.py --cpu-smoke        # two toy models on CPU: the plumbing, not the numbers
    python benchmarks/advisor_single_gpu.py --case name=mine,family=llama,layers=12,hidden=2048,heads=16,\
        kv_heads=4,ffn=5504,vocab=32000,seq=4096,mb=2,ac=op     # shapes of your own, instead of the thirteen
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import gc
import io
import json
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # run from the tree, as the GPU machine does (PYTHONPATH=src)
GiB = 2**30


# --- the user's models, written plainly -----------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Case:
    name: str
    family: str  # "gpt" | "llama"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    mb: int
    ac: str = "none"
    upcast: bool = True

    def arch(self) -> str:
        kind = "gelu-4h" if self.family == "gpt" else "swiglu"
        return (f"layers={self.layers},hidden={self.hidden},heads={self.heads},kv_heads={self.kv_heads},"
                f"ffn={self.ffn},ffn_kind={kind},vocab={self.vocab},seq={self.seq},"
                f"tied={1 if self.family == 'gpt' else 0},dropout=0")


class CausalSelfAttention(nn.Module):
    def __init__(self, c: Case):
        super().__init__()
        self.n_head, self.d = c.heads, c.hidden // c.heads
        self.c_attn = nn.Linear(c.hidden, 3 * c.hidden)
        self.c_proj = nn.Linear(c.hidden, c.hidden)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, self.d).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class GPTBlock(nn.Module):
    def __init__(self, c: Case):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(c.hidden), nn.LayerNorm(c.hidden)
        self.attn = CausalSelfAttention(c)
        self.c_fc, self.c_proj = nn.Linear(c.hidden, c.ffn), nn.Linear(c.ffn, c.hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def precompute_freqs_cis(dim: int, end: int, theta: float = 500000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    return torch.polar(torch.ones(end, dim // 2), torch.outer(torch.arange(end).float(), freqs))


def apply_rotary_emb(x, freqs_cis):
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3).type_as(x)


def repeat_kv(x, n_rep: int):
    if n_rep == 1:
        return x
    bs, slen, n_kv, d = x.shape
    return x[:, :, :, None, :].expand(bs, slen, n_kv, n_rep, d).reshape(bs, slen, n_kv * n_rep, d)


class LlamaBlock(nn.Module):
    def __init__(self, c: Case):
        super().__init__()
        self.n_heads, self.n_kv, self.d = c.heads, c.kv_heads, c.hidden // c.heads
        self.wq = nn.Linear(c.hidden, c.heads * self.d, bias=False)
        self.wk = nn.Linear(c.hidden, c.kv_heads * self.d, bias=False)
        self.wv = nn.Linear(c.hidden, c.kv_heads * self.d, bias=False)
        self.wo = nn.Linear(c.heads * self.d, c.hidden, bias=False)
        self.w1 = nn.Linear(c.hidden, c.ffn, bias=False)
        self.w2 = nn.Linear(c.ffn, c.hidden, bias=False)
        self.w3 = nn.Linear(c.hidden, c.ffn, bias=False)
        self.attention_norm, self.ffn_norm = RMSNorm(c.hidden), RMSNorm(c.hidden)

    def forward(self, x, freqs_cis):
        B, T, _ = x.shape
        h = self.attention_norm(x)
        q = apply_rotary_emb(self.wq(h).view(B, T, self.n_heads, self.d), freqs_cis)
        k = apply_rotary_emb(self.wk(h).view(B, T, self.n_kv, self.d), freqs_cis)
        v = self.wv(h).view(B, T, self.n_kv, self.d)
        k, v = repeat_kv(k, self.n_heads // self.n_kv), repeat_kv(v, self.n_heads // self.n_kv)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def op_policy():
    """torchtitan's per-op selective activation checkpointing: keep SDPA's outputs and every other matmul's."""
    count = {"forward": 0, "recompute": 0}

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        name = func._overloadpacket.__name__
        if name in ("mm", "addmm"):
            count[mode] += 1
            return CheckpointPolicy.MUST_SAVE if count[mode] % 2 else CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if "scaled_dot_product" in name else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Model(nn.Module):
    def __init__(self, c: Case):
        super().__init__()
        self.c = c
        self.tok = nn.Embedding(c.vocab, c.hidden)
        self.pos = nn.Embedding(c.seq, c.hidden) if c.family == "gpt" else None
        self.blocks = nn.ModuleList((GPTBlock if c.family == "gpt" else LlamaBlock)(c) for _ in range(c.layers))
        self.norm = nn.LayerNorm(c.hidden) if c.family == "gpt" else RMSNorm(c.hidden)
        self.head = nn.Linear(c.hidden, c.vocab, bias=False)
        if c.family == "gpt":
            self.head.weight = self.tok.weight
        else:
            self.register_buffer("freqs_cis", precompute_freqs_cis(c.hidden // c.heads, c.seq), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        x = self.tok(idx)
        if self.pos is not None:
            x = x + self.pos(torch.arange(idx.shape[1], device=idx.device))
        extra = () if self.pos is not None else (self.freqs_cis,)
        for block in self.blocks:
            if self.c.ac == "full":
                x = checkpoint(block, x, *extra, use_reentrant=False)
            elif self.c.ac == "op":
                x = checkpoint(block, x, *extra, use_reentrant=False, context_fn=op_policy)
            else:
                x = block(x, *extra)
        return self.head(self.norm(x))


# --- the cases ---------------------------------------------------------------------------------------------------

CASES = (
    Case(name="gpt-350m", family="gpt", layers=24, hidden=1024, heads=16, kv_heads=16, ffn=4096, vocab=50304,
         seq=1024, mb=16),
    Case(name="gpt-774m", family="gpt", layers=36, hidden=1280, heads=20, kv_heads=20, ffn=5120, vocab=50304,
         seq=1024, mb=12, upcast=False),
    Case(name="gpt-1.5b", family="gpt", layers=48, hidden=1600, heads=25, kv_heads=25, ffn=6400, vocab=50304,
         seq=2048, mb=4, ac="full"),
    Case(name="gpt-2.7b", family="gpt", layers=32, hidden=2560, heads=32, kv_heads=32, ffn=10240, vocab=50304,
         seq=2048, mb=3, ac="op"),
    Case(name="gpt-150m-8k", family="gpt", layers=8, hidden=1024, heads=16, kv_heads=16, ffn=4096, vocab=50304,
         seq=8192, mb=1),
    Case(name="gpt-1.3b", family="gpt", layers=24, hidden=2048, heads=16, kv_heads=16, ffn=8192, vocab=50304,
         seq=4096, mb=1, ac="op"),
    Case(name="llama-1.3b", family="llama", layers=24, hidden=1792, heads=14, kv_heads=2, ffn=4864, vocab=128256,
         seq=4096, mb=3, ac="op"),
    Case(name="llama-2.9b", family="llama", layers=32, hidden=2560, heads=20, kv_heads=4, ffn=6912, vocab=128256,
         seq=4096, mb=2, ac="full"),
    Case(name="llama-500m-8k", family="llama", layers=16, hidden=1280, heads=10, kv_heads=10, ffn=3456,
         vocab=32000, seq=8192, mb=1, upcast=False),
    Case(name="llama-160m", family="llama", layers=12, hidden=896, heads=14, kv_heads=2, ffn=2432, vocab=32000,
         seq=1024, mb=16),
    Case(name="llama-1.1b-2k", family="llama", layers=16, hidden=1920, heads=15, kv_heads=5, ffn=5120,
         vocab=128256, seq=2048, mb=4, ac="op"),
    Case(name="gpt-650m-mb8", family="gpt", layers=24, hidden=1408, heads=11, kv_heads=11, ffn=5632, vocab=50304,
         seq=1024, mb=8, ac="full"),
    Case(name="llama-2.9b-ac", family="llama", layers=27, hidden=2816, heads=22, kv_heads=2, ffn=7680,
         vocab=128256, seq=2048, mb=2, upcast=False),
)
"""Off the profile's grid: its layers are GPT 768-6144 wide (768, 1152, 1536, 2304, ...) with 4h MLPs and Llama
768-8192 (768, 1024, 1536, 2048, ...) with 3.5h MLPs and a quarter of the heads as KV heads, head dims 64/128,
token counts powers of two; no case here has one of those layers."""

SMOKE = (
    Case(name="gpt-toy", family="gpt", layers=2, hidden=64, heads=4, kv_heads=4, ffn=256, vocab=256, seq=32, mb=2),
    Case(name="llama-toy", family="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=160, vocab=256, seq=32,
         mb=2, ac="op", upcast=False),
)
WARMUP, TIMED = 3, 10


@dataclass
class Measured:
    step_s: float
    allocated: int
    reserved: int
    params: int
    sm_mhz: float = 0.0
    """The SM clock NVML reads while the timed steps run (0: not read); the profile's points ran in short
    bursts, a case's steps run for seconds at the clock its power draw allows."""
    power_w: float = 0.0
    steal: float | None = None
    """The hypervisor's steal of all the host's CPUs while the timed steps ran (:mod:`gpucomm.hostload`; None:
    not counted here): the host's other tenants, which a host-paced step moves with."""
    steal_most: float | None = None
    """The same on the most-stolen CPU."""
    spread: float = 1.0
    """The slowest timed step over the fastest: how much the case moved while it ran."""
    gc_s: float = 0.0
    """Seconds Python's garbage collector ran during the timed steps (:class:`gpucomm.hostload.GcTimer`)."""
    gc_full: int = 0
    """Full (generation-2) collections among them."""


def _cpu_model() -> str:
    """The env block's reading: the host's CPU sets a host-paced step's time."""
    from gpucomm.env import collect_env

    return collect_env("cpu").host.get("cpu_model", "?")


def _nvml_clock(device: torch.device) -> tuple[float, float]:
    """(SM clock MHz, power W) of ``device`` now, by NVML; (0, 0) when NVML cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda._get_nvml_device_index(device))
        return (float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0)
    except Exception:  # context only: its absence must not lose a case
        return 0.0, 0.0


def train_step(c: Case, model: nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor, amp) -> None:
    """One step of the user's loop: forward and loss under ``amp``, backward, optimizer step, zero_grad."""
    x, y = batch[:, :-1], batch[:, 1:]
    with amp:
        logits = model(x)
        if c.upcast:
            loss = F.cross_entropy(logits.float().view(-1, c.vocab), y.reshape(-1))
        else:
            loss = F.cross_entropy(logits.view(-1, c.vocab), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def build(c: Case, device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer, list[torch.Tensor], object]:
    """The case's model (built on ``device``), fused AdamW, two batches of tokens and the autocast context."""
    torch.manual_seed(0)
    with device:  # built and initialised on the GPU, as a user does with torch.device("cuda") for big models
        model = Model(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = [torch.randint(0, c.vocab, (c.mb, c.seq + 1), device=device) for _ in range(2)]
    return model, opt, data, torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def run_case(c: Case, device: torch.device, warmup: int, timed: int) -> Measured:
    """Train ``c`` for ``warmup + timed`` steps (module docstring)."""
    from gpucomm import hostload

    cuda = device.type == "cuda"
    model, opt, data, amp = build(c, device)
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    ends, host, cpus, gct = [], [], None, hostload.GcTimer()
    with contextlib.ExitStack() as timed_steps:  # the collector's count: from the first timed step to the sync
        for step in range(warmup + timed):
            if step <= warmup and cuda:
                torch.cuda.synchronize(device)
            if step == warmup:
                cpus = hostload.snapshot()
                timed_steps.enter_context(gct)
            t0 = time.perf_counter()
            train_step(c, model, opt, data[step % 2], amp)
            if cuda:
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                ends.append(ev)
            host.append(time.perf_counter() - t0)
        clock = _nvml_clock(device) if cuda else (0.0, 0.0)  # the host is ahead: the device is running the steps
        if cuda:
            torch.cuda.synchronize(device)
            times = [ends[i - 1].elapsed_time(ends[i]) * 1e-3 for i in range(warmup + 1, warmup + timed)]
            alloc, resv = torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device)
        else:
            times, alloc, resv = host[warmup:], 0, 0
        steal = hostload.steal_since(cpus)
    params = sum(p.numel() for p in model.parameters())
    del model, opt, data
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return Measured(step_s=statistics.median(times), allocated=int(alloc), reserved=int(resv), params=params,
                    sm_mhz=clock[0], power_w=clock[1], steal=steal.share if steal else None,
                    steal_most=steal.most if steal else None, spread=max(times) / min(times) if times else 1.0,
                    gc_s=gct.seconds, gc_full=gct.collections[2])


def predict(c: Case, hardware: str, host: str = "profile") -> dict:
    """The advisor's first row for ``c``, through ``gpucomm advise ... --json`` (in this process)."""
    from gpucomm import cli

    argv = ["advise", "--gpus", "1", "--hardware", hardware, "--arch", c.arch(), "--layout",
            f"tp=1,pp=1,cp=1,dp=1,shard=none,mb={c.mb},ac={c.ac}", "--global-batch", str(c.mb), "--loss",
            "upcast" if c.upcast else "autocast", "--host", host,
            "--json"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    if rc != 0:
        raise RuntimeError(f"gpucomm {' '.join(argv)} -> exit {rc}: {err.getvalue().strip()}")
    data = json.loads(out.getvalue())
    row = data["advice"][0]
    row["_assumptions"] = data.get("assumptions", [])
    return row


def host_times(src) -> dict[str, float]:
    """The host time a layer ``src`` (a ``ProfileSource``) prices for each (family, mode) the probe reads, keyed
    as :func:`host_readings` keys them: what a reading is divided by."""
    return {f"{fam} {mode}": t for (fam, mode), (_, _, t) in src.host_steps().items()}


def _probe(hardware: str, repeats: int | None = None) -> dict:
    """The advisor's ``--host this`` probe (:func:`gpucomm.advisor.compute.measure.host_ratios`, ``repeats``
    rounds: default its own) on the profile shipped for ``hardware`` or derived for it (the H100 SXM's, timed on
    an H100), here: ``readings`` as :func:`host_readings` keys them (seconds a layer here, from whole steps),
    ``line`` (the advisor's assumption line) and ``said`` (the ratios in words)."""
    from gpucomm.advisor.compute import measure, source

    src = source.measured_for(hardware)
    if src is None:
        return {"readings": {}, "line": "", "said": f"no measured profile ships for {hardware} or derives for it"}
    ratios, line = measure.host_ratios(src, **({"repeats": repeats} if repeats else {}))
    there = host_times(src)
    readings = {f"{fam} {mode}": r * there[f"{fam} {mode}"] for (fam, mode), r in ratios.items()
                if f"{fam} {mode}" in there}
    return {"readings": readings, "line": line,
            "said": ", ".join(f"{fam} {mode} x{r:.2f}" for (fam, mode), r in sorted(ratios.items()))}


def _probe_in_child(hardware: str) -> dict:
    """:func:`_probe` in a child process (this script with ``--probe-json``), so that its profiler passes leave
    nothing in the process that trains the cases (module docstring).

    Raises:
        RuntimeError: the child failed (its last line of stderr)."""
    import subprocess

    run = subprocess.run([sys.executable, __file__, "--probe-json", "--hardware", hardware], capture_output=True,
                         text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"the --host this probe (child process) exited {run.returncode}: "
                           f"{(run.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _around(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per (family, mode) read both before and after the cases, the geometric mean of the two readings: the
    host the cases ran on, as far as two probes that bracket them in time can say."""
    return {k: math.sqrt(before[k] * after[k]) for k in before if k in after}


def _err(pred: float, meas: float) -> float:
    return pred / meas - 1 if meas > 0 else float("nan")


def _pct(e: float) -> str:
    return "—" if e != e else f"{e:+.1%}"


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.1f} M"


_ROW = re.compile(r"^\| (?P<name>[^|]+?) \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| (?P<step>[\d,.]+) ms \| "
                  r"(?P<pstep>[\d,.]+) ms \| [^|]+ \| (?P<alloc>[\d.]+) / (?P<palloc>[\d.]+) GiB \| [^|]+ \| "
                  r"(?P<resv>[\d.]+) / (?P<presv>[\d.]+) GiB \|")


def parse_case(spec: str) -> Case:
    """A case from ``name=..,family=..,layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,vocab=..,seq=..,mb=..``
    (optional ``ac=none|full|op``, ``upcast=1|0``): shapes chosen by whoever runs the script, checked the same way.

    Raises:
        ValueError: a key missing or unknown, or a value of the wrong kind (one line naming ``--case``).
    """
    ints = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "mb")
    try:
        kv = dict(part.split("=", 1) for part in spec.split(","))
    except ValueError:
        raise ValueError(f"--case {spec!r}: expected key=value pairs separated by commas") from None
    unknown = sorted(set(kv) - {"name", "family", "ac", "upcast", *ints})
    missing = sorted({"name", "family", *ints} - set(kv))
    if unknown or missing:
        raise ValueError(f"--case {spec!r}: " + (f"unknown keys {', '.join(unknown)}" if unknown else
                                                 f"missing {', '.join(missing)}") +
                         f"; expected name, family, {', '.join(ints)} and optionally ac, upcast")
    if kv["family"] not in ("gpt", "llama"):
        raise ValueError(f"--case {spec!r}: family: expected gpt or llama, but got {kv['family']!r}")
    if kv.get("ac", "none") not in ("none", "full", "op"):
        raise ValueError(f"--case {spec!r}: ac: expected none, full or op, but got {kv['ac']!r}")
    bad = [k for k in ints if not kv[k].isdigit() or int(kv[k]) < 1]
    if bad:
        raise ValueError(f"--case {spec!r}: {bad[0]}: expected a positive integer, but got {kv[bad[0]]!r}")
    nums = {k: int(kv[k]) for k in ints}
    return Case(name=kv["name"], family=kv["family"], ac=kv.get("ac", "none"), upcast=kv.get("upcast", "1") != "0",
                **nums)


_HOST_READING = re.compile(r"(?P<fam>gpt|llama) \d+-wide \d+x\d+ (?P<mode>none|full|op) steps of \d+ and \d+ "
                           r"layers: (?P<ms>[\d.]+) ms a layer here")


def host_readings(text: str) -> dict[str, float]:
    """The ``--host this`` probe's readings a run printed among the advisor's assumptions: per ``"family mode"``,
    this machine's marginal time a layer in the profile's host-paced whole steps of that checkpointing mode, in
    seconds (empty where the run priced the profile's host)."""
    return {f"{m['fam']} {m['mode']}": float(m["ms"]) / 1e3 for m in _HOST_READING.finditer(text)}


def read_host(path: str) -> dict[str, float]:
    """The host readings of an earlier run (:func:`host_readings`): its sidecar's ``host_here_s``, else the text
    report beside it or the report itself.  Runs before the probe read each mode (before 2026-12-04's fifth
    session) recorded ``op`` steps only, keyed by family: read as ``"family op"``."""
    p = Path(path)
    if p.suffix == ".json":
        got = json.loads(p.read_text()).get("host_here_s")
        if got:
            return {(k if " " in k else f"{k} op"): float(v) for k, v in got.items()}
        p = p.with_suffix(".txt")
    return host_readings(p.read_text()) if p.is_file() else {}


_AFTER = re.compile(r"host probe again after the cases[^:]*: (?P<said>.*)")


def read_host_after(path: str) -> dict[str, float]:
    """The probe's readings after an earlier run's cases, keyed as :func:`host_readings`: its sidecar's
    ``host_after_s``, else the ratios its report printed (``host probe again after the cases: gpt op x1.24,
    ...``; runs before 2026-12-04's fifth session: ``gpt x1.11``, the op steps) times the host time a layer the
    current profile prices — the profile those ratios were read against, where the run's was this one."""
    from gpucomm.advisor.compute import profile, source

    p = Path(path)
    if p.suffix == ".json":
        got = json.loads(p.read_text()).get("host_after_s")
        if got:
            return {k: float(v) for k, v in got.items()}
        p = p.with_suffix(".txt")
    m = _AFTER.search(p.read_text()) if p.is_file() else None
    if m is None:
        return {}
    there = host_times(profile.ProfileSource(source.shipped(source.SHIPPED["h200-nvswitch"])))
    out = {}
    for fam, mode, r in re.findall(r"(gpt|llama)(?: (none|full|op))? x([\d.]+)", m["said"]):
        key = f"{fam} {mode or 'op'}"
        if key in there:
            out[key] = float(r) * there[key]
    return out


def _price_recorded_host(readings: dict[str, float], line: str = "") -> None:
    """Make ``--host this`` price the host a probe read (:func:`read_host`, :func:`_probe_in_child`) instead of
    timing this machine's: each reading over the host time a layer the current profile prices, said in the
    assumption line the advisor prints (``line``, else one that says the readings are the run's own).  The
    readings of runs before the optimizer's share was taken out of a step's marginal (before 16d1e83) hold it
    (under 1% of a 768-wide op layer's host time)."""
    from gpucomm.advisor.compute import source

    def recorded(src):
        there = host_times(src)
        ratios = {k: readings[k] / there[k] for k in readings if k in there}
        said = line or ("host: the run's own, as its --host this probe read it: " + "; ".join(
            f"{k} {readings[k] * 1e3:.2f} ms a layer there, {there[k] * 1e3:.2f} ms in the profile "
            f"(x{r:.2f})" for k, r in sorted(ratios.items())))
        return src.with_host({tuple(k.split(" ")): r for k, r in ratios.items()}, said)

    source._this_host = recorded


def read_measured(path: str) -> dict[str, tuple[Measured, dict]]:
    """The measurements of an earlier run: its JSON sidecar (``--out X.txt`` also writes ``X.json``, exact), or
    its text table (step in 0.1 ms, memory in 0.1 GiB).  ``{case: (Measured, the prediction printed then)}``.

    Raises:
        ValueError: the file has no row of a known case (one line naming ``--repredict``).
    """
    text = Path(path).read_text()
    got: dict[str, tuple[Measured, dict]] = {}
    if path.endswith(".json"):
        for r in json.loads(text)["cases"]:
            got[r["case"]] = (Measured(step_s=r["step_s"], allocated=r["allocated"], reserved=r["reserved"],
                                       params=r["params"]), r.get("predicted", {}))
            if "spec" in r:  # a --case of that run: its shape travels with its measurement
                got[r["case"]][1]["_case"] = Case(**r["spec"])
    else:
        for line in text.splitlines():
            m = _ROW.match(line)
            if m is None:
                continue
            num = {k: float(v.replace(",", "")) for k, v in m.groupdict().items() if k != "name"}
            got[m["name"]] = (Measured(step_s=num["step"] / 1e3, allocated=int(num["alloc"] * GiB),
                                       reserved=int(num["resv"] * GiB), params=0),
                              {"step_time_s": num["pstep"] / 1e3, "memory_allocated_bytes": num["palloc"] * GiB,
                               "memory_reserved_bytes": num["presv"] * GiB})
    known = {c.name for c in CASES} | {n for n, (_, p) in got.items() if "_case" in p}
    if not set(got) & known:
        raise ValueError(f"--repredict {path}: no row of a known case ({', '.join(sorted(known))}); pass the .txt "
                         "or .json that advisor_single_gpu.py --out wrote on the GPU")
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-smoke", action="store_true", help="two toy models on CPU (the plumbing, not the numbers)")
    ap.add_argument("--repredict", metavar="RESULTS",
                    help="no training: predict again, on any machine, the cases an earlier GPU run measured (its "
                         ".txt, or the .json sidecar --out writes beside it) and compare with its measurements")
    ap.add_argument("--hardware", default="h200-nvswitch", help="the --hardware the advisor predicts for")
    ap.add_argument("--only", nargs="+", help="case names to run")
    ap.add_argument("--case", action="append", default=[], metavar="SPEC",
                    help="a case of your own instead of the built-in ones (repeatable): name=..,family=gpt|llama,"
                         "layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,vocab=..,seq=..,mb=..[,ac=..][,upcast=0]")
    ap.add_argument("--host", default="auto", choices=("auto", "profile", "this", "recorded", "around"),
                    help="gpucomm advise --host: this (this machine's host, timed on its GPU: needs the profile's "
                         "GPU here), profile (the measuring machine's host), recorded (--repredict: the host the "
                         "earlier run's probe read before its cases), around (--repredict: the geometric mean of "
                         "that reading and the probe's after the cases — a diagnosis of host drift), or auto "
                         "(default: this where the cases run on a GPU, recorded for --repredict of a run that "
                         "probed its host, else profile)")
    ap.add_argument("--out", help="also write the report to this file (and the measurements to its .json sidecar)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--probe-json", action="store_true", help=argparse.SUPPRESS)  # the child of _probe_in_child
    args = ap.parse_args(argv)
    if args.probe_json:  # the child of _probe_in_child: the probe alone, its result as one JSON line
        print(json.dumps(_probe(args.hardware)))
        return 0
    try:
        own = tuple(parse_case(spec) for spec in args.case)
    except ValueError as exc:
        print(f"advisor_single_gpu: error: {exc}", file=sys.stderr)
        return 2
    earlier: dict[str, tuple[Measured, dict]] = {}
    if args.repredict:
        try:
            earlier = read_measured(args.repredict)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"advisor_single_gpu: error: {exc if isinstance(exc, ValueError) else f'--repredict {args.repredict}: cannot be read ({exc})'}",
                  file=sys.stderr)
            return 2
    cuda = torch.cuda.is_available() and not args.cpu_smoke and not args.repredict
    if not cuda and not args.cpu_smoke and not args.repredict:
        print("advisor_single_gpu: error: no CUDA device; pass --cpu-smoke to run the toy cases on CPU, or "
              "--repredict RESULTS to predict an earlier GPU run again", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    readings = read_host(args.repredict) if args.repredict else {}
    if args.host == "around":
        readings = _around(readings, read_host_after(args.repredict)) if args.repredict else {}
    if args.host in ("recorded", "around") and not readings:
        what = (f"{args.repredict} holds no host probe readings"
                + (" before and after its cases" if args.host == "around" else "") + "; use --host profile"
                if args.repredict else "prices the host an earlier run's probe read; pass --repredict RESULTS")
        print(f"advisor_single_gpu: error: --host {args.host}: {what}", file=sys.stderr)
        return 2
    if args.host == "auto":  # the steps run on this machine: its host paces them, so price this host
        args.host = "this" if cuda else "recorded" if readings else "profile"
    if args.host in ("recorded", "around"):
        _price_recorded_host(readings)
    probed: dict = {}
    if args.host == "this" and cuda:  # the probe apart from the cases' process (module docstring)
        try:
            probed = _probe_in_child(args.hardware)
        except (RuntimeError, OSError, ValueError) as exc:
            print(f"advisor_single_gpu: error: {exc}; run it on a GPU of the profile's model, or pass "
                  "--host profile", file=sys.stderr)
            return 2
        _price_recorded_host(probed["readings"], probed["line"])
    cases = own or (SMOKE if args.cpu_smoke else CASES)
    if args.repredict:
        builtin = {c.name: c for c in CASES}  # the run's order; a case's own shape where the run saved it
        cases = tuple(p.get("_case") or builtin[n] for n, (_, p) in earlier.items() if "_case" in p or n in builtin)
    if args.only:
        unknown = sorted(set(args.only) - {c.name for c in cases})
        if unknown:
            print(f"advisor_single_gpu: error: --only {' '.join(unknown)}: no such case; expected some of "
                  f"{', '.join(c.name for c in cases)}", file=sys.stderr)
            return 2
        cases = tuple(c for c in cases if c.name in args.only)
    warmup, timed = (1, 2) if args.cpu_smoke else (WARMUP, TIMED)
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    gpu = torch.cuda.get_device_name(device) if cuda else "cpu"
    say("# gpucomm advise vs real training steps on one GPU" + (" (predicted again)" if args.repredict else ""))
    say()
    say(f"command: python benchmarks/advisor_single_gpu.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    if args.repredict:
        say(f"date: {_dt.date.today().isoformat()}; measurements: {args.repredict} (not re-run); predicted now on "
            f"{gpu} for --hardware {args.hardware} --host {args.host}; 'then' is the prediction printed with the "
            f"measurements")
    else:
        say(f"date: {_dt.date.today().isoformat()}; device: {gpu}; torch {torch.__version__}"
            f"{', CUDA ' + str(torch.version.cuda) if cuda else ''}; host CPU {_cpu_model()}; predicted for "
            f"--hardware {args.hardware} --host {args.host}")
        clock = "the intervals between CUDA events at each step's end" if cuda else "the host clock per step (CPU)"
        say(f"loop: fp32 weights, {'bf16 autocast, ' if cuda else 'fp32 (CPU), '}SDPA, fused AdamW, {warmup} "
            f"warm-up + {timed} timed steps, median of {clock}")
    if args.cpu_smoke:
        say("CPU SMOKE: toy models on CPU against an H200 prediction; the errors below mean nothing")
    say()
    then = " then |" if args.repredict else ""
    say(f"| case | params | seq x mb | ac | loss | step measured | predicted | error |{then} allocated meas / pred | "
        f"error | reserved meas / pred | error |{then}")
    say("|---|---:|---|---|---|---:|---:|---:|" + ("---:|" if then else "") + "---:|---:|---:|---:|"
        + ("---:|" if then else ""))
    rows, t0, notes = [], time.perf_counter(), []
    for c in cases:
        m, before = earlier[c.name] if args.repredict else (run_case(c, device, warmup, timed), {})
        p = predict(c, args.hardware, "this" if args.host in ("recorded", "around") else args.host)
        et, ea, er = (_err(p["step_time_s"], m.step_s), _err(p["memory_allocated_bytes"], m.allocated),
                      _err(p["memory_reserved_bytes"], m.reserved))
        rows.append((c, m, p, et, ea, er))
        notes.extend(a for a in p["_assumptions"] if a not in notes)
        size = _size(m.params) if m.params else "—"
        t_then = f" {_pct(_err(before['step_time_s'], m.step_s))} |" if then else ""
        r_then = f" {_pct(_err(before['memory_reserved_bytes'], m.reserved))} |" if then else ""
        say(f"| {c.name} | {size} | {c.seq} x {c.mb} | {c.ac} | {'upcast' if c.upcast else 'autocast'}"
            f" | {m.step_s * 1e3:,.1f} ms | {p['step_time_s'] * 1e3:,.1f} ms | {_pct(et)} |{t_then} "
            f"{m.allocated / GiB:.1f} / {p['memory_allocated_bytes'] / GiB:.1f} GiB | {_pct(ea)} | "
            f"{m.reserved / GiB:.1f} / {p['memory_reserved_bytes'] / GiB:.1f} GiB | {_pct(er)} |{r_then}")
    wall = time.perf_counter() - t0
    before = probed.get("readings") or host_readings("\n".join(notes))
    after: dict[str, float] = {}
    if probed:
        say()
        try:
            again = _probe_in_child(args.hardware)
        except (RuntimeError, OSError, ValueError) as exc:  # the rows are measured: the report still gets written
            again = {"readings": {}, "said": f"failed ({exc})"}
        after = again["readings"]
        say(f"host probe again after the cases (the host's drift while they ran): {again['said']}")
        mid = _around(before, after)
        if mid:  # diagnosis, not the headline: the advisor itself is run once, on the probe before
            _price_recorded_host(mid)
            errs = [(c.name, _err(predict(c, args.hardware, "this")["step_time_s"], m.step_s))
                    for c, m, *_ in rows]
            worst = max(errs, key=lambda e: abs(e[1]))
            say(f"predicted at the host read around the cases (per family and mode, the geometric mean of the probe's "
                f"readings before and after them; diagnosis of host drift, not the figures above): median |error| "
                f"{statistics.median(abs(e) for _, e in errs):.1%}, worst {abs(worst[1]):.1%} ({worst[0]}); "
                + ", ".join(f"{n} {_pct(e)}" for n, e in errs))
    say()
    ts = [abs(r[3]) for r in rows]
    rs = [abs(r[5]) for r in rows if r[1].reserved > 0]
    med = statistics.median(ts)
    ok_t = med <= 0.05 and max(ts) <= 0.10
    ok_m = bool(rs) and max(rs) <= 0.10
    say(f"step time: median |error| {med:.1%} (target <= 5%), worst {max(ts):.1%} (target every case <= 10%): "
        f"{'MET' if ok_t else 'MISSED'}")
    if rs:
        say(f"peak reserved memory: worst |error| {max(rs):.1%}, median {statistics.median(rs):.1%} "
            f"(target every case within 10%): {'MET' if ok_m else 'MISSED'}")
        say(f"peak allocated memory: median |error| {statistics.median(abs(r[4]) for r in rows):.1%}, worst "
            f"{max(abs(r[4]) for r in rows):.1%}")
    if not args.repredict:
        clocks = [f"{r[0].name} {r[1].sm_mhz:,.0f} MHz {r[1].power_w:,.0f} W" for r in rows if r[1].sm_mhz]
        if clocks:
            say(f"SM clock and power while each case's timed steps ran (NVML, once per case): {'; '.join(clocks)}")
        moved = [f"{r[0].name} {r[1].spread:.2f}x, gc {r[1].gc_s * 1e3:.0f} ms ({r[1].gc_full} full)"
                 + (f", steal {r[1].steal:.1%}/{r[1].steal_most:.1%}" if r[1].steal is not None else "")
                 for r in rows]
        say("the host while each case's timed steps ran (slowest step over fastest; Python's garbage collections "
            "and their time; the hypervisor's steal of all CPUs / of the most-stolen one; gpucomm.hostload): "
            + "; ".join(moved))
        say(f"wall time of the cases: {wall:.0f} s")
    say()
    say("the advisor's assumptions, as it printed them:")
    for a in notes:
        say(f"- {a}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        if not args.repredict:
            side = {"kind": "advisor-single-gpu", "device": gpu, "torch": torch.__version__,
                    "host_here_s": before, "host_after_s": after, "cases": [
                {"case": c.name, "spec": dataclasses.asdict(c), "step_s": m.step_s, "allocated": m.allocated, "reserved": m.reserved,
                 "params": m.params, "sm_mhz": m.sm_mhz, "power_w": m.power_w, "steal": m.steal,
                 "steal_most": m.steal_most, "spread": m.spread, "gc_s": m.gc_s, "gc_full": m.gc_full, "predicted": {k: p[k] for k in ("step_time_s", "memory_allocated_bytes",
                                                                     "memory_reserved_bytes")}}
                for c, m, p, *_ in rows]}
            Path(args.out).with_suffix(".json").write_text(json.dumps(side, indent=1) + "\n")
    return 1 if args.check and not (ok_t and ok_m) else 0


if __name__ == "__main__":
    raise SystemExit(main())
