"""Does ``gpucomm advise --host this`` predict a host-paced step when its probe runs right beside the step?

On lent H200 machines a host-paced case (per-op checkpointing) strayed by a tenth from the probe run a minute
or two before it (docs/choosing.md, section 6).  This script separates the host's drift from the model: for
each round and case it runs the advisor's probe (:func:`gpucomm.advisor.compute.measure.host_ratios`, the op
steps), trains the case as ``benchmarks/advisor_single_gpu.py`` does, runs the probe again, and prints the step
measured beside the advisor's prediction at the probe before, at the probe after and at their geometric mean —
the three readings seconds apart from the step, not minutes.  The probe runs in this process, beside the
step (advisor_single_gpu.py runs it in a child process); whether its profiler passes slow the steps timed after
them is what benchmarks/cupti_linger.py measures.

Usage (one GPU of the shipped profile's model)::

    PYTHONPATH=src python benchmarks/host_adjacent.py --cases gpt-1.3b llama-1.1b-2k --rounds 3 \\
        --out benchmarks/results/host-adjacent_h200x1_DATE.txt
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT / "src", ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))  # run from the tree, as the GPU machine does (PYTHONPATH=src)


def main(argv: list[str] | None = None) -> int:
    import advisor_single_gpu as bench
    from _shipped import shipped_here
    from gpucomm import hostload
    from gpucomm.advisor.compute import profile

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=["gpt-1.3b", "llama-1.1b-2k"],
                    help="names of advisor_single_gpu.py's cases (default: its two host-paced op cases)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the cases (default 3)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds inside each probe (default 3; the advisor's 5)")
    ap.add_argument("--hardware", default="h200-nvswitch")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    known = {c.name: c for c in bench.CASES}
    bad = [n for n in args.cases if n not in known]
    if bad or args.rounds < 1 or args.repeats < 1:
        what = (f"--cases {' '.join(bad)}: no such case; expected some of {', '.join(known)}" if bad else
                f"--rounds/--repeats: expected counts >= 1, but got {args.rounds}/{args.repeats}")
        print(f"host_adjacent: error: {what}", file=sys.stderr)
        return 2
    prof = shipped_here(args.hardware, "host_adjacent")
    if prof is None:
        return 2
    src = profile.ProfileSource(prof)
    device = torch.device("cuda", torch.cuda.current_device())
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    say("# A host-paced step against the --host this probe run right before and right after it")
    say()
    say(f"command: python benchmarks/host_adjacent.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"date: {_dt.date.today().isoformat()}; device: {torch.cuda.get_device_name()}; host CPU "
        f"{bench._cpu_model()}; profile {prof.source}; each probe {args.repeats} rounds of the op steps")
    say()
    say("| round | case | ac | probe before (x) | step measured | predicted at before | at after | at around | "
        "probe after (x) | case's slowest / fastest step | steal: probe before, case, probe after |")
    say("|---:|---|---|---|---:|---:|---:|---:|---|---:|---|")
    errs: dict[str, list[float]] = {"before": [], "after": [], "around": []}
    there = bench.host_times(src)

    def said(r: dict[str, float]) -> str:
        return ", ".join(f"{k} {v / there[k]:.2f}" for k, v in sorted(r.items()) if k in there)

    def probe() -> tuple[dict[str, float], str]:
        """The probe's readings and the hypervisor's steal while it ran (all CPUs / the most-stolen one)."""
        cpus = hostload.snapshot()
        got = bench._probe(args.hardware, args.repeats)["readings"]
        st = hostload.steal_since(cpus)
        return got, f"{st.share:.1%}/{st.most:.1%}" if st else "—"

    try:
        for i in range(args.rounds):
            for n in args.cases:
                c = known[n]
                before, st_before = probe()
                m = bench.run_case(c, device, bench.WARMUP, bench.TIMED)
                after, st_after = probe()
                st_case = f"{m.steal:.1%}/{m.steal_most:.1%}" if m.steal is not None else "—"
                pred = {}
                for key, r in (("before", before), ("after", after), ("around", bench._around(before, after))):
                    bench._price_recorded_host(r)
                    pred[key] = bench.predict(c, args.hardware, "this")["step_time_s"]
                    errs[key].append(bench._err(pred[key], m.step_s))
                say(f"| {i} | {n} | {c.ac} | {said(before)} | {m.step_s * 1e3:,.1f} ms | "
                    + " | ".join(f"{pred[k] * 1e3:,.1f} ms ({bench._pct(bench._err(pred[k], m.step_s))})"
                                 for k in ("before", "after", "around")) + f" | {said(after)} | {m.spread:.2f}x | "
                    f"{st_before}, {st_case}, {st_after} |")
                torch.cuda.empty_cache()
    except KeyboardInterrupt:  # a timeout keeps the rounds done
        say("(interrupted: the rounds above are what finished)")
    say()
    for k, v in errs.items():
        if v:
            say(f"predicted at the probe {k}: median |error| {statistics.median(abs(e) for e in v):.1%}, worst "
                f"{max(abs(e) for e in v):.1%}, within 10%: {sum(abs(e) <= 0.10 for e in v)}/{len(v)}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
