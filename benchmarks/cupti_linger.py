"""Does a finished ``torch.profiler`` pass slow the host's later work in the same process?

Kineto releases CUPTI when a trace stops only where ``TEARDOWN_CUPTI=1`` (pytorch/pytorch#144455: without it
"the torch profiler continues to affect program performance even after profiling has completed"; the closed
pytorch/pytorch#146604 measured training 10-20% slower after a profile).  Until 2026-12-04's fifth session
``gpucomm measure`` read each point's busy time under the profiler right after timing it, so every point timed
after the first busy pass — the shipped profile's whole steps among them — may carry that cost, and so may the
probe of ``--host this`` and the cases ``benchmarks/advisor_single_gpu.py`` trained after it in one process.
Both now time with no profiler run before them in the process (measure's busy pass follows every point; the
probe has none, and the benchmark runs it in a child process).  Whether the shipped profile's host-paced steps
must be timed again is what this measures; a host-paced step is where it would show.

Each worker process times, on a GPU of the shipped profile's model, the probe's host-paced whole ``op`` steps
(2 and 8 layers of the profile's most host-paced shape per family) and their marginal time a layer
(:meth:`ProfileSource.marginal_s`), in one of three conditions:

* ``clean``: nothing else ran in the process;
* ``linger``: one busy pass (``busy_phases``) over the 2-layer step first, with CUPTI left as Kineto leaves it;
* ``teardown``: the same pass in a process started with ``TEARDOWN_CUPTI=1``.

The driver runs ``--rounds`` x the three conditions as separate processes, interleaved (the host moves within
seconds on lent machines: benchmarks/results/host-adjacent_h200x1_2026-12-04.txt), and prints each process's
marginals and, per condition, the median and its ratio to ``clean``.  Usage (one GPU)::

    PYTHONPATH=src python benchmarks/cupti_linger.py --rounds 6 --out benchmarks/results/cupti-linger_h200x1_DATE.txt
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))  # run from the tree, as the GPU machine does (PYTHONPATH=src)

MODES = ("clean", "linger", "teardown")


def worker(mode: str, hardware: str, repeats: int) -> dict[str, float]:
    """One process's marginal time a layer per family (seconds), in condition ``mode`` (module docstring)."""
    import torch

    from _shipped import shipped_here
    from gpucomm.advisor.compute import measure, profile
    from gpucomm.advisor.compute.profile import layer_shape_of
    from gpucomm.advisor.compute.shapes import Rates, StepShape, expected_s

    prof = shipped_here(hardware, "cupti_linger")
    if prof is None:
        raise SystemExit(2)
    src = profile.ProfileSource(prof)
    ctx = measure._Ctx(torch.device("cuda", torch.cuda.current_device()), prof.precision, prof.software,
                       busy=False, window_s=measure.HOST_WINDOW_S)  # timed as the probe times
    steps = {fam: v for (fam, m), v in src.host_steps().items() if m == "op"}
    if mode != "clean":  # teardown: the driver started this process with TEARDOWN_CUPTI=1 (read by Kineto)
        a = next(iter(steps.values()))[0]
        st = StepShape(layer=layer_shape_of(a["layer"]), vocab=a["vocab"], layers=a["layers"],
                       loss=a.get("loss", "upcast"))
        phases, _ = measure._step_work(ctx, st)
        measure.time_phases(phases, ctx.device, *ctx.reps("step", expected_s("step", st, Rates())))
        measure.busy_phases(phases, ctx.device)
        del phases
        torch.cuda.empty_cache()
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeats):
        for fam, (a, b, _) in sorted(steps.items()):
            for r in (a, b):
                t = measure.step_seconds(ctx, layer_shape_of(r["layer"]), r["vocab"], r["layers"],
                                         r.get("loss", "upcast"), expected=r["seconds"])
                times.setdefault((fam, r["layers"]), []).append(t)
            torch.cuda.empty_cache()
    out = {}
    for fam, (a, b, _) in steps.items():
        ta, tb = (statistics.median(times[(fam, r["layers"])]) for r in (a, b))
        out[fam] = src.marginal_s(a["layer"], a["vocab"], (a["layers"], ta), (b["layers"], tb))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6, help="rounds of the three conditions (default 6)")
    ap.add_argument("--repeats", type=int, default=3, help="timings of each step in a worker (default 3)")
    ap.add_argument("--hardware", default="h200-nvswitch")
    ap.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        print(f"cupti_linger: error: --rounds/--repeats: expected counts >= 1, but got {args.rounds}/"
              f"{args.repeats}", file=sys.stderr)
        return 2
    if args.worker:
        print(json.dumps(worker(args.worker, args.hardware, args.repeats)))
        return 0
    import torch

    from _shipped import shipped_here

    if shipped_here(args.hardware, "cupti_linger") is None:
        return 2
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    say("# Does a finished torch.profiler pass slow the host's later launches? (whole op steps' marginal a layer)")
    say()
    say(f"command: python benchmarks/cupti_linger.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"date: {_dt.date.today().isoformat()}; device: {torch.cuda.get_device_name()}; torch {torch.__version__}; "
        f"each worker a fresh process, {args.repeats} timings of each step")
    say()
    say("| round | condition | marginal ms a layer |")
    say("|---:|---|---|")
    got: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    env = {k: v for k, v in os.environ.items() if k != "TEARDOWN_CUPTI"}
    try:
        for i in range(args.rounds):
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):  # each condition early and late in turn
                run = subprocess.run([sys.executable, __file__, "--worker", mode, "--hardware", args.hardware,
                                      "--repeats", str(args.repeats)], capture_output=True, text=True,
                                     env={**env, "TEARDOWN_CUPTI": "1"} if mode == "teardown" else env, timeout=300)
                if run.returncode != 0:
                    say(f"| {i} | {mode} | worker failed (exit {run.returncode}): "
                        f"{(run.stderr.strip().splitlines() or ['?'])[-1]} |")
                    continue
                m = json.loads(run.stdout.strip().splitlines()[-1])
                for fam, v in m.items():
                    got[mode].setdefault(fam, []).append(v)
                say(f"| {i} | {mode} | " + ", ".join(f"{f} {v * 1e3:.2f}" for f, v in sorted(m.items())) + " |")
    except KeyboardInterrupt:  # a timeout keeps the rounds done
        say("(interrupted: the rounds above are what finished)")
    say()
    for fam in sorted(got["clean"]):
        base = statistics.median(got["clean"][fam])
        said = [f"clean {base * 1e3:.2f} ms"]
        for mode in MODES[1:]:
            if got[mode].get(fam):
                med = statistics.median(got[mode][fam])
                said.append(f"{mode} {med * 1e3:.2f} ms (x{med / base:.2f})")
        say(f"{fam}: medians over processes: " + ", ".join(said))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
