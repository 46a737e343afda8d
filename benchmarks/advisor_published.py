"""Check ``gpucomm advise`` against published training runs, through its CLI contract.

Every row of the published-training JSON Lines file (default ``../shared/reference/published-training.jsonl``
relative to the repository root; the file is not in the repo) is turned into one ``gpucomm advise`` command:

* the model from the row's shape: ``--arch layers=..,hidden=..,heads=..,kv_heads=..,vocab=..,seq=..`` (and
  ``ffn``, ``ffn_kind=swiglu`` for Llama shapes, whose MLP width the row's model name fixes);
* the hardware from the row's GPU (A100 80 GB -> ``a100-nvlink3``, A100 40 GB -> ``a100-40gb-nvlink3``,
  H100 -> ``h100-nvswitch``, Megatron-LM 2019's DGX-2H V100s -> ``v100-dgx2h`` with ``--dtype fp16``),
  ``--nodes`` = GPUs / GPUs per node (the row's, else 8), ``--global-batch`` from the row;
* ``--layout`` from what the row states: tp, pp, cp, the sharding (plain DP -> none, DeepSpeed ZeRO-3 ->
  zero3, FSDP FULL_SHARD / FSDP2 -> fsdp, SHARD_GRAD_OP -> zero2), the micro-batch and the activation
  checkpointing where stated ("selective (op)", torchtitan's per-op policy -> ``ac=op``; other "selective"
  -> Megatron's ``ac=selective``); every key the row leaves open is searched by the advisor;
* ``--json``: the first row of ``advice`` (the recommendation among layouts matching the fixed keys) gives
  the predicted tokens/s per GPU, compared with the published (reported ``wps``/``tok/s/GPU``, else the
  source file's derived tokens/s/GPU).

Rows that publish TFLOP/s per GPU instead of tokens/s are evaluated where the sequence length is known (the
row's, or what its source text states: :data:`SOURCE_FACTS`): the predicted tokens/s/GPU times the FLOPs per
token the source counts in (:func:`flops_per_token`: ``8 N`` for Megatron-LM 2019, as its authors' own 2020
figures imply; else Megatron's Eq. 3, :func:`megatron_flops_per_token`) against the published TFLOP/s,
marked ``TFLOP/s/GPU`` in the metric column.  The software stack is the row's too (:func:`kernels`: work
published before Megatron-LM's fused kernels of September 2020 runs ``--kernels unfused`` unless its
``other_opts`` name fused kernels or flash attention).  The summary line holds the issue's targets over every
evaluated row; a line per metric follows.  Rows that cannot be evaluated (no throughput, no sequence length or shape, a GPU
count the source does not give) are listed with the reason.  The FSDP
paper's GPT-175B rows give 128-512 GPUs and linear scaling; 128 is used.

Targets (issue 11): median |error| <= 15%, at least 70% of evaluated rows within 25%, no published run
called infeasible.  The advisor's constants are physics with stated sources; see docs/choosing.md for
which were set with published rows in view.

Usage::

    python benchmarks/advisor_published.py [PATH] [--only ID ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import statistics
import sys
import time
from pathlib import Path

from _report import emit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "reference" / "published-training.jsonl"
HOLDOUT = ROOT / "benchmarks" / "published_holdout.jsonl"
"""Published runs outside the published-training set, with their sources (issue 16): checked the same way, never
used to set a constant."""
TARGETS = {DEFAULT: ("issue 11", 0.15, 0.70), HOLDOUT: ("issue 16", 0.12, 0.80)}
_FFN = {"Llama 3 8B": 14336, "Llama 3 70B": 28672, "Llama 2 13B": 13824, "Llama 2 70B": 28672}


_MLM19 = ("Shoeybi et al. 2019 (arXiv:1909.08053) Sec. 4.2: GPT-2 training 'with sequences of 1024 subword "
          "units', activation checkpointing after every transformer layer; Sec. 5.1: batch 8 for the model-parallel "
          "runs (the 1-GPU baseline is the first of them); DGX-2H servers of 16 V100s.  FLOPs: the paper prints "
          "no formula; the same authors' Megatron-LM v1.0 page (nv-adlr.github.io/MegatronLMV1, 2020) gives the "
          "same 1.2B baseline as '62.4 teraFLOPs' and '1288' ms per iteration of 8 x 1024 tokens, 'a 60% "
          "improvement over our previously 39 teraFLOPs' (62.4 = 1.6 x 39): 62.4e12 x 1.288 / 8192 = 9.81e9 "
          "FLOPs per token, which 8 N (6 N + 2 N recomputed, N every parameter: 9.71e9) reproduces within 1.1% "
          "and Eq. 3 (1.054e10) does not (+7.4%)")
SOURCE_FACTS = {"Megatron-LM 2019": {"seq_len": 1024, "ac": "full", "batch": 8, "hardware": "v100-dgx2h",
                                     "dtype": "fp16", "flops": "8N", "why": _MLM19}}
"""What a row's source text states that the row's own fields leave empty, by the row's ``family`` prefix (read
in the stored paper text; the ZeRO paper's sequence length was not found there, so its row stays out)."""


STACKS = {
    "Megatron-LM": {"weights": "16-bit", "loss": "fused",
                    "why": "Megatron-LM keeps 16-bit weights with an fp32 master copy in its optimizer (Shoeybi et "
                           "al. 2019, Narayanan et al. 2021: mixed precision) and computes the loss with its "
                           "vocab-parallel cross-entropy, in place on the logits (megatron/core/tensor_parallel/"
                           "cross_entropy.py)"},
    "ZeRO paper": {"weights": "16-bit", "loss": "fused", "why": "DeepSpeed ZeRO on Megatron-LM: 16-bit weights, "
                                                                "fp32 master (Rajbhandari et al. SC20, Sec. 3.1)"},
    "MosaicML llm-foundry": {"weights": "fp32", "loss": "fused",
                             "why": "Composer FSDP mixed precision keeps fp32 sharded weights; LLM Foundry's MPT "
                                    "defaults to loss_fn 'fused_crossentropy' (flash-attn's CrossEntropyLoss, "
                                    "llmfoundry/models/mpt/modeling_mpt.py)"},
    "torchtitan": {"weights": "fp32", "loss": "upcast-del",
                   "why": "FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) over fp32 sharded "
                          "weights; cross_entropy_loss on pred.float(), then del pred before backward (torchtitan "
                          "components/loss.py, train.py)"},
    "Llama 3 paper": {"weights": "fp32", "loss": "upcast", "software": "fused",
                      "why": "Meta's stack: FSDP over fp32 sharded weights is assumed and the loss is not stated: "
                             "the advisor's defaults.  Software fused: the paper's 4D-parallel stack (Sec. 3.3.2, "
                             "tensor parallelism as in Megatron with Korthikanti et al. 2023's sequence "
                             "parallelism) splits the layer's norms and residual adds over the 8 tensor-parallel "
                             "ranks, where eager PyTorch (the profile's tp=8 layer) runs them at full width on "
                             "every rank: 24.5 of a 405B layer's 55 ms (tp=8, mb=1, ac=none) on an H100 derived from the H200 profile"},
    "BLOOM": {"weights": "16-bit", "loss": "fused",
              "why": "Megatron-DeepSpeed: bf16 weights with DeepSpeed's bf16 optimizer (fp32 master), Megatron's "
                     "vocab-parallel cross-entropy"},
    "PyTorch FSDP paper": {"weights": "fp32", "loss": "upcast",
                           "why": "FSDP bf16 mixed precision over fp32 sharded weights (Zhao et al. 2023, Sec. 4); "
                                  "the loss implementation is not stated: the advisor's default"},
}
"""Each family's software as the advisor's ``--weights``, ``--loss`` and ``--software`` keys (``software``: absent =
``eager``, what the measured profile ran), by the row's ``family`` prefix.  Only rows priced from a measured
profile (H100 SXM at 700 W, H200) read ``--software``; the datasheet model of A100/V100 ignores it."""


def stack(row: dict) -> dict:
    """The row's weight storage, loss and software (:data:`STACKS`); the advisor's defaults when the family is
    unknown."""
    return next((f for k, f in STACKS.items() if (row.get("family") or "").startswith(k)),
                {"weights": "fp32", "loss": "upcast"})


def _facts(row: dict) -> dict:
    return next((f for k, f in SOURCE_FACTS.items() if (row.get("family") or "").startswith(k)), {})


def published_tokens(row: dict) -> float | None:
    rep, der = row.get("reported") or {}, row.get("derived") or {}
    return rep.get("wps_per_gpu") or rep.get("tok_s_per_gpu") or der.get("tokens_per_s_per_gpu")


def published_tflops(row: dict) -> float | None:
    rep, der = row.get("reported") or {}, row.get("derived") or {}
    return rep.get("tflops_per_gpu") or der.get("tflops_per_gpu")


def megatron_flops_per_token(row: dict, seq: int) -> float:
    """Megatron's count (Narayanan et al. SC21, Eq. 3, per token): ``96 l h^2 (1 + s / 6h + V / 16 l h)``, the
    recomputation forward included — the convention NVIDIA's Megatron papers report TFLOP/s in (assumed for the
    2019 paper, whose text does not state its formula)."""
    ell, h, v = row["layers"], row["hidden"], row["vocab"]
    return 96.0 * ell * h * h * (1 + seq / (6 * h) + v / (16 * ell * h))


def params_8n_flops_per_token(row: dict, seq: int) -> float:
    """``8 N``: 6 N for forward + backward and 2 N for the recomputed forward, ``N`` every parameter of a
    GPT-2 with learned positions, biases, LayerNorms and the head tied to the embedding:
    ``N = l (12 h^2 + 13 h) + V h + s h + 2 h`` (1.2135e9 for the 2019 paper's 1.2B, 8.317e9 for its 8.3B)."""
    ell, h, v = row["layers"], row["hidden"], row["vocab"]
    return 8.0 * (ell * (12 * h * h + 13 * h) + v * h + seq * h + 2 * h)


def model_flops_per_token(row: dict, seq: int) -> float:
    """The advisor's model FLOPs (PaLM's convention, ``6 N_mm + 12 L h s``, :mod:`gpucomm.models`)."""
    from gpucomm.advisor.layout import parse_arch

    return parse_arch(",".join(_arch(row, seq))).flops_per_token(seq)


def flops_per_token(row: dict, seq: int) -> tuple[float, str]:
    """The count a row's TFLOP/s are in: the row's own (``flops``: "eq3" or "model"), the source's
    (:data:`SOURCE_FACTS`, ``flops``), else Eq. 3."""
    if _facts(row).get("flops") == "8N":
        return params_8n_flops_per_token(row, seq), "8N"
    if row.get("flops") == "model":
        return model_flops_per_token(row, seq), "6N_mm + 12Lhs"
    return megatron_flops_per_token(row, seq), "Eq. 3"


def kernels(row: dict) -> str:
    """The software stack's kernels, from the row's own fields: "fused" where ``other_opts`` names fused
    kernels or flash attention (the SC21 Megatron rows: "Megatron fused kernels"; LLM Foundry: flash), else
    "unfused" for work published (arXiv YYMM) before September 2020, when Megatron-LM's fused softmax and
    bias-GeLU kernels landed (commit 51a2e6b, 2020-09-11), else "fused"."""
    opts = (row.get("other_opts") or "").lower()
    if "fused" in opts or "flash" in opts:
        return "fused"
    m = re.search(r"arXiv:(\d{2})(\d{2})\.", row.get("source") or "")
    if m and (2000 + int(m[1]), int(m[2])) < (2020, 9):
        return "unfused"
    return "fused"


def metric(row: dict) -> tuple[str, float | None, float]:
    """(metric, published value, factor from predicted tokens/s/GPU to that metric)."""
    tokens = published_tokens(row)
    if tokens:
        return "tok/s/GPU", tokens, 1.0
    seq = row.get("seq_len") or _facts(row).get("seq_len")
    tflops = published_tflops(row)
    if tflops and seq and row.get("layers") and row.get("vocab"):
        return "TFLOP/s/GPU", tflops, flops_per_token(row, seq)[0] / 1e12
    return "", None, 0.0


def _arch(row: dict, seq: int) -> list[str]:
    """The row's shape as ``--arch`` keys (Llama shapes, which give ``kv_heads``, with their SwiGLU width)."""
    arch = [f"layers={row['layers']}", f"hidden={row['hidden']}", f"heads={row['heads']}",
            f"kv_heads={row.get('kv_heads') or row['heads']}", f"vocab={row['vocab']}", f"seq={seq}"]
    if row.get("kv_heads"):
        arch += [f"ffn={row.get('ffn') or _FFN[row['model_name']]}", "ffn_kind=swiglu"]
    return arch


def command(row: dict) -> tuple[list[str] | None, str]:
    """The ``gpucomm advise`` arguments for one row, or None and why it cannot be evaluated."""
    facts = _facts(row)
    if metric(row)[1] is None:
        if published_tflops(row):
            return None, ("publishes TFLOP/s per GPU only, and neither the row nor its source text (as read) "
                          "states the sequence length that converts it")
        return None, "publishes no per-GPU throughput (a scaling percentage or a figure only)"
    seq = row.get("seq_len") or facts.get("seq_len")
    if not (row.get("layers") and seq and row.get("vocab")):
        return None, "shape or sequence length not published"
    gpu, mem = row.get("gpu") or "", row.get("gpu_mem_gb")
    if gpu.startswith("A100"):
        hw = "a100-40gb-nvlink3" if mem == 40 else "a100-nvlink3"
    elif gpu.startswith("H100"):
        hw = "h100-96gb-nvswitch" if mem == 96 else "h100-nvswitch"
    elif facts.get("hardware"):
        hw = facts["hardware"]
    else:
        return None, f"no profile for {gpu}"
    per_node = row.get("gpus_per_node") or 8
    gpus = row.get("gpus_total") or (128 if row["id"].startswith("fsdp23-") else None)
    if not gpus or (gpus > per_node and gpus % per_node):
        return None, "GPU count not given"
    mb = row.get("micro_batch_per_gpu")
    batch = row.get("global_batch_seqs") or (mb * gpus if isinstance(mb, int) else None) or facts.get("batch")
    if not batch:
        return None, "global batch not given"
    arch = _arch(row, seq)
    sharding = row.get("sharding") or ""
    shard = row.get("zero") or (
        "zero3" if "DeepSpeed" in sharding else "zero2" if "SHARD_GRAD_OP" in sharding
        else "fsdp" if ("FULL_SHARD" in sharding or "FSDP" in sharding) else "none")
    layout = [f"tp={row['tp']}", f"pp={row['pp']}", f"cp={row['cp'] or 1}", f"shard={shard}"]
    if row.get("stages"):
        layout.append("stages=" + "+".join(map(str, row["stages"])))
    if row.get("reshard"):
        layout.append(f"reshard={row['reshard']}")
    if isinstance(mb, int):
        layout.append(f"mb={mb}")
    ac = (row.get("activation_checkpointing") or facts.get("ac") or "").lower()
    ac = "full" if ac.startswith(("full", "yes")) else "op" if ac.startswith("selective (op)") else \
        "selective" if ac.startswith("selective") else \
        "none" if ac.startswith("none") else "auto"
    layout.append(f"ac={ac}")
    if row.get("vpp"):
        layout.append(f"vpp={row['vpp']}")
    argv = ["advise", "--arch", ",".join(arch), "--hardware", hw, "--nodes", str(max(1, gpus // per_node)),
            "--gpus", str(min(gpus, per_node)), "--global-batch", str(batch), "--layout", ",".join(layout)]
    dtype = facts.get("dtype") or "bf16"
    if facts.get("dtype"):
        argv += ["--dtype", dtype]
    if row.get("network"):
        argv += ["--network", row["network"]]
    sw = stack(row)
    if sw["weights"] == "16-bit":
        argv += ["--weights", dtype]
    if sw["loss"] != "upcast":
        argv += ["--loss", sw["loss"]]
    if kernels(row) != "fused":
        argv += ["--kernels", kernels(row)]
    if sw.get("software", "eager") != "eager":
        argv += ["--software", sw["software"]]
    return [*argv, "--json", "--top", "1"], ""


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``gpucomm <argv>`` in this process (the CLI contract, without 35 interpreter start-ups)."""
    from gpucomm.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def evaluate(rows: list[dict]) -> list[dict]:
    results = []
    for row in rows:
        argv, why = command(row)
        name, published, factor = metric(row)
        res = {"id": row["id"], "published": published, "metric": name, "argv": argv, "skip": why}
        if argv is not None:
            rc, out, err = run_cli(argv)
            if rc != 0:
                res.update(skip="", error=err.strip(), feasible=False)
            else:
                best = json.loads(out)["advice"][0]
                res.update(predicted=best["tokens_per_s_per_gpu"] * factor, feasible=best["fits"],
                           layout=best["layout"],
                           mfu=best["mfu"], memory=best["memory_per_gpu_bytes"])
                res["error_frac"] = res["predicted"] / res["published"] - 1
        results.append(res)
    return results


def _layout(d: dict) -> str:
    keys = ("tp", "pp", "cp", "dp", "shard", "mb", "ac", "vpp")
    return " ".join(f"{k}={d[k]}" for k in keys if d.get(k) not in (None, 1, "none") or k == "dp")


def ablation(rows: list[dict]) -> list[str]:
    """The rows whose source states its own FLOPs count or stack (:data:`SOURCE_FACTS`, :func:`kernels`)
    predicted both ways, each compared in both counts: what each correction moves."""
    rows = [r for r in rows if _facts(r).get("flops") and command(r)[0] is not None]
    if not rows:
        return []
    out = ["", "Megatron-LM 2019 rows by kernels and FLOPs count (error of predicted vs published TFLOP/s/GPU):", "",
           "| row | fused, Eq. 3 | fused, 8N | unfused, Eq. 3 | unfused, 8N (used) |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        argv = command(r)[0]
        argv = [a for i, a in enumerate(argv) if a != "--kernels" and (i == 0 or argv[i - 1] != "--kernels")]
        seq = r.get("seq_len") or _facts(r)["seq_len"]
        cells = []
        for k in ("fused", "unfused"):
            rc, text, err = run_cli(argv + (["--kernels", k] if k != "fused" else []))
            tps = json.loads(text)["advice"][0]["tokens_per_s_per_gpu"] if rc == 0 else float("nan")
            for f in (megatron_flops_per_token(r, seq), params_8n_flops_per_token(r, seq)):
                cells.append(f"{tps * f / 1e12 / published_tflops(r) - 1:+.1%}")
        out.append(f"| {r['id']} | " + " | ".join(cells) + " |")
    from gpucomm.advisor.layout import parse_arch
    from gpucomm.advisor.memory import activation_terms
    from gpucomm.advisor.timing import EW_PASSES, unfused_layer_bytes

    r = rows[0]
    for r in rows:
        if r["gpus_total"] == 1:
            break
    seq = r.get("seq_len") or _facts(r)["seq_len"]
    arch = parse_arch(f"layers={r['layers']},hidden={r['hidden']},heads={r['heads']},vocab={r['vocab']},seq={seq}")
    u = unfused_layer_bytes(arch, seq, 1)
    unfused = 2 * u.fwd + u.bwd + 2 * u.scores_fwd + u.scores_bwd  # full recompute: the forward twice
    scores = 2 * u.scores_fwd + u.scores_bwd
    fused = (EW_PASSES + 1) * sum(activation_terms(arch, "none").values()) * arch.hidden
    out.append(f"{r['id']}: memory-bound traffic per token and layer with full recomputation, elementwise only "
               f"(tp 1): unfused {unfused / 1e6:.2f} MB ({scores / unfused:.0%} of it over the scores), fused "
               f"{fused / 1e6:.2f} MB")
    return out


SEARCH_405B = ["advise", "--model", "llama3-405b", "--hardware", "h100-nvswitch", "--nodes", "512", "--gpus", "8",
               "--global-batch", "2048", "--json", "--top", "1"]
BOUNDS = [["advise", "--model", "llama3-405b", "--hardware", "h100-nvswitch", "--nodes", "2048", "--gpus", "8",
           "--json", "--top", "1"],
          ["advise", "--model", "gpt-350m", "--hardware", "h200-nvswitch", "--scale", "--max-gpus", "16384", "--json"],
          ["advise", "--hardware", "h200-nvswitch", "--params", "1e15", "--json"],
          ["advise", "--hardware", "h100-nvswitch", "--params", "1e15", "--nodes", "2048", "--gpus", "8", "--json"]]
"""Issue 16's bounds: 16,384 GPUs and an absurd workload, each answered (or refused) within 5 s."""


def time_search() -> str:
    """The issue's speed cases through the CLI: Llama-3-405B on 4,096 H100s searched, then :data:`BOUNDS`."""
    from gpucomm import models
    from gpucomm.advisor import hardware
    from gpucomm.advisor.search import Job, candidates

    t0 = time.perf_counter()
    rc, out, err = run_cli(SEARCH_405B)
    dt = time.perf_counter() - t0
    job = Job(arch=models.get("llama3-405b"), profile=hardware.get("h100-nvswitch"), nodes=512, gpus_per_node=8,
              global_batch=2048, seq=8192)
    best = json.loads(out)["advice"][0] if rc == 0 else {}
    lines = [(f"search: gpucomm {' '.join(SEARCH_405B)} -> {len(candidates(job, {}))} layouts in {dt:.2f} s "
              f"(target <= 5 s); best {_layout(best.get('layout', {}))}, "
              f"{best.get('tokens_per_s_per_gpu', float('nan')):,.0f} tokens/s/GPU") if rc == 0
             else f"search failed: {err}"]
    for argv in BOUNDS:
        t0 = time.perf_counter()
        rc, out, err = run_cli(argv)
        dt = time.perf_counter() - t0
        what = (json.loads(out)["answer"][0] if rc == 0 else err.strip())[:110]
        lines.append(f"bounds: gpucomm {' '.join(argv)} -> exit {rc} in {dt:.2f} s (target <= 5 s): {what}")
    return "\n".join(lines)


def report(results: list[dict], path: Path, elapsed: float, argv: list[str] | None = None) -> str:
    lines = ["# gpucomm advise vs published training runs", "",
             "command: python benchmarks/advisor_published.py " + " ".join(sys.argv[1:] if argv is None else argv)
             + ("  (rows: ../shared/reference/published-training.jsonl beside the repository, the default)"
                if path.name == DEFAULT.name else ""),
             "hardware: none used (predictions); published runs on A100/H100/V100 clusters as each row states", "",
             "| id | published | predicted | error | fits | layout (searched keys filled in) | MFU | metric |",
             "|---|---:|---:|---:|---|---|---:|---|"]
    evaluated = [r for r in results if r.get("argv")]
    for r in evaluated:
        if "predicted" in r:
            lines.append(f"| {r['id']} | {r['published']:,.1f} | {r['predicted']:,.1f} | {r['error_frac']:+.1%} | "
                         f"{'yes' if r['feasible'] else 'NO'} | {_layout(r['layout'])}"
                         f"{' kernels=unfused' if '--kernels' in r['argv'] else ''} | {r['mfu']:.1%} | "
                         f"{r['metric']} |")
        else:
            lines.append(f"| {r['id']} | {r['published']:,.1f} | — | — | NO | {r.get('error', '')} | — | "
                         f"{r['metric']} |")
    skipped = [r for r in results if not r.get("argv")]
    if skipped:
        lines += ["", "Not evaluated:", ""] + [f"- {r['id']}: {r['skip']}" for r in skipped]

    def stats(rs: list[dict]) -> tuple[float, int, int]:
        errs = [abs(r["error_frac"]) for r in rs if "error_frac" in r]
        return (statistics.median(errs) if errs else float("nan"), sum(e <= 0.25 for e in errs), len(errs))

    infeasible = [r["id"] for r in evaluated if not r.get("feasible")]
    median, within, n = stats(evaluated)
    issue, t_med, t_within = TARGETS[HOLDOUT] if path.name == HOLDOUT.name else TARGETS[DEFAULT]
    ok = median <= t_med and n and within / n >= t_within and not infeasible
    lines += ["", f"summary: {len(evaluated)} rows evaluated of {len(results)}; {issue}'s targets over every "
                  f"evaluated row: median |error| {median:.1%} (target <= {t_med:.0%}); within 25%: {within}/{n} = "
                  f"{within / max(1, n):.0%} (target >= {t_within:.0%}); called infeasible: {len(infeasible)} "
                  f"{infeasible or ''} (target 0); targets {'MET' if ok else 'NOT MET'}; {elapsed:.1f} s"]
    for name, what in (("tok/s/GPU", "rows that publish tokens/s/GPU"),
                       ("TFLOP/s/GPU", "rows that publish TFLOP/s/GPU only (predicted tokens/s/GPU x the FLOPs "
                                       "per token each source counts in, see flops_per_token(); kernels as each "
                                       "row's software, see kernels())")):
        rs = [r for r in evaluated if r["metric"] == name]
        if rs:
            m, w, k = stats(rs)
            lines.append(f"  of which {len(rs)} {what}: median |error| {m:.1%}, within 25%: {w}/{k}")
    return "\n".join(lines) + "\n"


MEASURED_HARDWARE = ("h100-nvswitch", "h200-nvswitch")
"""The ``--hardware`` keys priced from the shipped measured compute profile (the others: the datasheet model,
which ignores ``--software``)."""


def software_ablation(rows: list[dict]) -> list[str]:
    """The rows priced from the measured compute profile, predicted as each software stack: what the row's
    stated stack (:data:`STACKS`) moves, and what the other would give."""
    cmds = [(r, command(r)[0]) for r in rows]
    cmds = [(r, a) for r, a in cmds if a is not None and a[a.index("--hardware") + 1] in MEASURED_HARDWARE]
    if not cmds:
        return []
    out = ["", "Rows priced from the measured compute profile, by software stack (error of predicted vs published; "
           "the row's stack, from its source, is the one used):", "", "| row | eager | fused | used |",
           "|---|---:|---:|---|"]
    for r, argv in cmds:
        argv = [a for i, a in enumerate(argv) if a != "--software" and (i == 0 or argv[i - 1] != "--software")]
        _, published, factor = metric(r)
        cells = []
        for sw in ("eager", "fused"):
            rc, text, _ = run_cli(argv + ["--software", sw])
            tps = json.loads(text)["advice"][0]["tokens_per_s_per_gpu"] if rc == 0 else float("nan")
            cells.append(f"{tps * factor / published - 1:+.1%}")
        out.append(f"| {r['id']} | " + " | ".join(cells) + f" | {stack(r).get('software', 'eager')} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT), help="published-training JSON Lines file")
    ap.add_argument("--only", nargs="+", metavar="ID", help="evaluate only these row ids")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    path = Path(args.path).resolve()
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        print(f"advisor_published: error: {path}: {exc}", file=sys.stderr)
        return 2
    if args.only:
        rows = [r for r in rows if r["id"] in set(args.only)]
    t0 = time.perf_counter()
    text = report(evaluate(rows), path, time.perf_counter() - t0, argv)
    text += "".join(line + "\n" for line in ablation(rows) + software_ablation(rows))
    if not args.only and path.name == DEFAULT.name:  # the speed case belongs with the full published check
        text += time_search() + "\n"
    return emit(text, args.out)


if __name__ == "__main__":
    sys.exit(main())
