"""What a compute profile's busy times say: each layer point's measured time beside its kernels' busy time, the
whole steps' marginal time a layer beside the device work the lookups price for it, and the device time the
advisor prices for the single-GPU benchmark's cases (``compute_s``, the host left out).

Reads a profile (default: the shipped H200 one); needs no GPU::

    PYTHONPATH=src python benchmarks/profile_busy.py --out benchmarks/results/profile-busy_h200x1_DATE.txt
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _report import emit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))
SHIPPED = ROOT / "src/gpucomm/advisor/compute/data/h200.json"


def _device_s(case) -> float:
    """The advisor's device time of one benchmark case's step (``compute_s``), through its CLI contract."""
    tied = 1 if case.family == "gpt" else 0
    kind = "gelu-4h" if case.family == "gpt" else "swiglu"
    cmd = [sys.executable, "-m", "gpucomm", "advise", "--gpus", "1", "--hardware", "h200-nvswitch", "--arch",
           f"layers={case.layers},hidden={case.hidden},heads={case.heads},kv_heads={case.kv_heads},"
           f"ffn={case.ffn},ffn_kind={kind},vocab={case.vocab},seq={case.seq},tied={tied},dropout=0",
           "--layout", f"tp=1,pp=1,cp=1,dp=1,shard=none,mb={case.mb},ac={case.ac}", "--global-batch",
           str(case.mb), "--loss", "upcast" if case.upcast else "autocast", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)["advice"][0]["compute_s"]


def main(argv: list[str] | None = None) -> int:
    from gpucomm.advisor.compute.profile import ProfileError, ProfileSource, load

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default=str(SHIPPED))
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    try:
        prof = load(args.profile, arg="--profile")
    except ProfileError as exc:
        print(f"profile_busy: error: {exc}", file=sys.stderr)
        return 2
    lines = ["# A compute profile's busy times", "",
             f"command: python benchmarks/profile_busy.py{' --out ' + args.out if args.out else ''}",
             f"profile: {args.profile if args.profile != str(SHIPPED) else 'the shipped h200.json'} "
             f"({prof.gpu}; busy times merged {[m.get('created') for m in prof.device.get('merges', [])][-1:]})",
             "", "## Layer points at tp 1: measured (between CUDA events) and busy (kernels under torch.profiler)",
             "", "| family | hidden | tokens | ac | measured ms | busy ms | busy / measured |", "|---|---:|---:|---|---:|---:|---:|"]
    for r in sorted(prof.points["layer"], key=lambda r: (r["family"], r["ac"], r["hidden"], r["seq"] * r["mb"])):
        if r["tp"] != 1 or "busy_fwd_s" not in r:
            continue
        wall, busy = r["fwd_s"] + r["bwd_s"], r["busy_fwd_s"] + r["busy_bwd_s"]
        lines.append(f"| {r['family']} | {r['hidden']} | {r['seq'] * r['mb']} | {r['ac']} | {wall * 1e3:.2f} | "
                     f"{busy * 1e3:.2f} | {busy / wall:.2f} |")
    t = ProfileSource(prof)._tables
    lines += ["", "## Whole steps: a layer's marginal time (the optimizer's share out) and its priced device work",
              "", "| family | ac | hidden | tokens | marginal ms | device ms | device / marginal |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for s, m, d in sorted(t._marginals, key=lambda x: (x[0].family, x[0].ac, x[0].hidden, x[0].tokens)):
        lines.append(f"| {s.family} | {s.ac} | {s.hidden} | {s.tokens} | {m * 1e3:.2f} | {d * 1e3:.2f} | "
                     f"{d / m:.2f} |")
    import math

    lines += ["", "## What the lookups take from the whole steps", "",
              "a layer inside a step over its busy-priced device work (device-bound steps; in_step):"]
    for (fam, ac), pts in sorted(t._in_step.items()):
        lines.append(f"- {fam} {ac}: " + ", ".join(f"{h}-wide at {n} tokens {math.exp(v):.2f}"
                                                     for (h, n), v in pts))
    lines += ["", "the host's time a layer (host-paced steps' marginal, median over shapes):"]
    lines += [f"- {fam} {ac}: {v * 1e3:.2f} ms" for (fam, ac), v in sorted(t._step_host.items())]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from advisor_single_gpu import CASES

    lines += ["", "## The device time the advisor prices for the single-GPU benchmark's cases (host left out)", "",
              "| case | ac | device ms |", "|---|---|---:|"]
    for c in CASES:
        lines.append(f"| {c.name} | {c.ac} | {_device_s(c) * 1e3:.1f} |")
    text = "\n".join(lines) + "\n"
    return emit(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
