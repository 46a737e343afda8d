"""Check ``gpucomm advise`` against published training runs, through its CLI contract.

Every row of the published-training JSON Lines file (default ``../shared/reference/published-training.jsonl``
relative to the repository root; the file is not in the repo) is turned into one ``gpucomm advise`` command:

* the model from the row's shape: ``--arch layers=..,hidden=..,heads=..,kv_heads=..,vocab=..,seq=..`` (and
  ``ffn``, ``ffn_kind=swiglu`` for Llama shapes, whose MLP width the row's model name fixes);
* the hardware from the row's GPU (A100 80 GB -> ``a100-nvlink3``, A100 40 GB -> ``a100-40gb-nvlink3``, H100 ->
  ``h100-nvswitch``), ``--nodes`` = GPUs / 8, ``--gpus 8``, ``--global-batch`` from the row;
* ``--layout`` from what the row states: tp, pp, cp, the sharding (plain DP -> none, DeepSpeed ZeRO-3 ->
  zero3, FSDP FULL_SHARD / FSDP2 -> fsdp, SHARD_GRAD_OP -> zero2), the micro-batch and the activation
  checkpointing where stated; every key the row leaves open is searched by the advisor;
* ``--json``: the first row of ``advice`` (the recommendation among layouts matching the fixed keys) gives
  the predicted tokens/s per GPU, compared with the published (reported ``wps``/``tok/s/GPU``, else the
  source file's derived tokens/s/GPU).

Rows that cannot be evaluated (no throughput, no sequence length or shape, V100s in 16-GPU DGX-2 nodes, a
GPU count the source does not give) are listed with the reason and left out of the summary.  The FSDP
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
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "reference" / "published-training.jsonl"
_FFN = {"Llama 3 8B": 14336, "Llama 3 70B": 28672, "Llama 2 13B": 13824, "Llama 2 70B": 28672}


def published_tokens(row: dict) -> float | None:
    rep, der = row.get("reported") or {}, row.get("derived") or {}
    return rep.get("wps_per_gpu") or rep.get("tok_s_per_gpu") or der.get("tokens_per_s_per_gpu")


def command(row: dict) -> tuple[list[str] | None, str]:
    """The ``gpucomm advise`` arguments for one row, or None and why it cannot be evaluated."""
    if not published_tokens(row):
        if (row.get("reported") or {}).get("tflops_per_gpu") or (row.get("derived") or {}).get("tflops_per_gpu"):
            return None, "publishes TFLOP/s per GPU only, without the sequence length that converts it to tokens/s"
        return None, "publishes no per-GPU throughput (a scaling percentage or a figure only)"
    if not (row.get("layers") and row.get("seq_len") and row.get("vocab")):
        return None, "shape or sequence length not published"
    gpu, mem = row.get("gpu") or "", row.get("gpu_mem_gb")
    if gpu.startswith("A100"):
        hw = "a100-40gb-nvlink3" if mem == 40 else "a100-nvlink3"
    elif gpu.startswith("H100"):
        hw = "h100-nvswitch"
    else:
        return None, f"no profile for {gpu}"
    gpus = row.get("gpus_total") or (128 if row["id"].startswith("fsdp23-") else None)
    if not gpus or gpus % 8:
        return None, "GPU count not given"
    mb = row.get("micro_batch_per_gpu")
    batch = row.get("global_batch_seqs") or (mb * gpus if isinstance(mb, int) else None)
    if not batch:
        return None, "global batch not given"
    swiglu = bool(row.get("kv_heads"))
    arch = [f"layers={row['layers']}", f"hidden={row['hidden']}", f"heads={row['heads']}",
            f"kv_heads={row.get('kv_heads') or row['heads']}", f"vocab={row['vocab']}", f"seq={row['seq_len']}"]
    if swiglu:
        arch += [f"ffn={_FFN[row['model_name']]}", "ffn_kind=swiglu"]
    sharding = row.get("sharding") or ""
    shard = ("zero3" if "DeepSpeed" in sharding else "fsdp" if ("FULL_SHARD" in sharding or "FSDP2" in sharding)
             else "zero2" if "SHARD_GRAD_OP" in sharding else "none")
    layout = [f"tp={row['tp']}", f"pp={row['pp']}", f"cp={row['cp'] or 1}", f"shard={shard}"]
    if isinstance(mb, int):
        layout.append(f"mb={mb}")
    ac = (row.get("activation_checkpointing") or "").lower()
    ac = "full" if ac.startswith(("full", "yes")) else "op" if ac.startswith("selective (op)") else \
        "selective" if ac.startswith("selective") else \
        "none" if ac.startswith("none") else "auto"
    layout.append(f"ac={ac}")
    if row.get("vpp"):
        layout.append(f"vpp={row['vpp']}")
    return ["advise", "--arch", ",".join(arch), "--hardware", hw, "--nodes", str(gpus // 8), "--gpus", "8",
            "--global-batch", str(batch), "--layout", ",".join(layout), "--json", "--top", "1"], ""


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
        res = {"id": row["id"], "published": published_tokens(row), "argv": argv, "skip": why}
        if argv is not None:
            rc, out, err = run_cli(argv)
            if rc != 0:
                res.update(skip="", error=err.strip(), feasible=False)
            else:
                best = json.loads(out)["advice"][0]
                res.update(predicted=best["tokens_per_s_per_gpu"], feasible=best["fits"], layout=best["layout"],
                           mfu=best["mfu"], memory=best["memory_per_gpu_bytes"])
                res["error_frac"] = res["predicted"] / res["published"] - 1
        results.append(res)
    return results


def _layout(d: dict) -> str:
    keys = ("tp", "pp", "cp", "dp", "shard", "mb", "ac", "vpp")
    return " ".join(f"{k}={d[k]}" for k in keys if d.get(k) not in (None, 1, "none") or k == "dp")


SEARCH_405B = ["advise", "--model", "llama3-405b", "--hardware", "h100-nvswitch", "--nodes", "512", "--gpus", "8",
               "--global-batch", "2048", "--json", "--top", "1"]


def time_search() -> str:
    """The issue's speed case: every layout of Llama-3-405B on 4,096 H100s searched through the CLI."""
    from gpucomm import models
    from gpucomm.advisor import hardware
    from gpucomm.advisor.search import Job, candidates

    t0 = time.perf_counter()
    rc, out, err = run_cli(SEARCH_405B)
    dt = time.perf_counter() - t0
    job = Job(arch=models.get("llama3-405b"), profile=hardware.get("h100-nvswitch"), nodes=512, gpus_per_node=8,
              global_batch=2048, seq=8192)
    best = json.loads(out)["advice"][0] if rc == 0 else {}
    return (f"search: gpucomm {' '.join(SEARCH_405B)} -> {len(candidates(job, {}))} layouts in {dt:.2f} s "
            f"(target <= 5 s); best {_layout(best.get('layout', {}))}, "
            f"{best.get('tokens_per_s_per_gpu', float('nan')):,.0f} tokens/s/GPU" if rc == 0 else f"search failed: {err}")


def report(results: list[dict], path: Path, elapsed: float, argv: list[str] | None = None) -> str:
    lines = ["# gpucomm advise vs published training runs", "",
             "command: python benchmarks/advisor_published.py " + " ".join(sys.argv[1:] if argv is None else argv)
             + ("  (rows: ../shared/reference/published-training.jsonl beside the repository, the default)"
                if path == DEFAULT else ""),
             "hardware: none used (predictions); published runs on A100/H100 clusters as each row states", "",
             "| id | published tok/s/GPU | predicted | error | fits | layout (searched keys filled in) | MFU |",
             "|---|---:|---:|---:|---|---|---:|"]
    evaluated = [r for r in results if r.get("argv")]
    for r in evaluated:
        if "predicted" in r:
            lines.append(f"| {r['id']} | {r['published']:,.1f} | {r['predicted']:,.1f} | {r['error_frac']:+.1%} | "
                         f"{'yes' if r['feasible'] else 'NO'} | {_layout(r['layout'])} | {r['mfu']:.1%} |")
        else:
            lines.append(f"| {r['id']} | {r['published']:,.1f} | — | — | NO | {r.get('error', '')} | — |")
    skipped = [r for r in results if not r.get("argv")]
    if skipped:
        lines += ["", "Not evaluated:", ""] + [f"- {r['id']}: {r['skip']}" for r in skipped]
    errs = [abs(r["error_frac"]) for r in evaluated if "error_frac" in r]
    infeasible = [r["id"] for r in evaluated if not r.get("feasible")]
    within = sum(e <= 0.25 for e in errs)
    median = statistics.median(errs) if errs else float("nan")
    ok = median <= 0.15 and errs and within / len(errs) >= 0.70 and not infeasible
    lines += ["", f"summary: {len(evaluated)} rows evaluated of {len(results)}; median |error| {median:.1%} "
                  f"(target <= 15%); within 25%: {within}/{len(errs)} = {within / max(1, len(errs)):.0%} "
                  f"(target >= 70%); called infeasible: {len(infeasible)} {infeasible or ''} (target 0); "
                  f"targets {'MET' if ok else 'NOT MET'}; {elapsed:.1f} s"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT), help="published-training JSON Lines file")
    ap.add_argument("--only", nargs="+", metavar="ID", help="evaluate only these row ids")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    path = Path(args.path)
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        print(f"advisor_published: error: {path}: {exc}", file=sys.stderr)
        return 2
    if args.only:
        rows = [r for r in rows if r["id"] in set(args.only)]
    t0 = time.perf_counter()
    text = report(evaluate(rows), path, time.perf_counter() - t0, argv)
    if not args.only and path == DEFAULT:  # the speed case belongs with the full published check
        text += time_search() + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
