"""Would pinning the training process to one CPU steady a host-paced step?  The pace by CPU, and the probe's step
pinned and unpinned, interleaved.

On the lent H200 machines the CPU's own pace moves 2.6x within a second with no hypervisor steal
(benchmarks/results/host-speed_h200x1_2026-12-04.txt), and a step the host paces moves with it.  The guest's
scheduler moves a process among its vCPUs, and each vCPU is a thread the host places on its own cores.  Two
stories fit that: the pace differs *by vCPU* (a neighbour shares one vCPU's host core), so that ``taskset -c N``
on a fast one would steady the step — advice a user can act on; or *every* vCPU slows at once (the host's clock,
its memory system), so that nothing inside the guest helps.  Each round here:

* ``sweep``: the fixed pure-Python workload of ``host_speed.py`` pinned to each CPU of the process's affinity in
  turn, ``--sweep`` seconds each: the pace by CPU at one moment;
* the probe's GPT ``op`` whole steps of 2 and 8 layers (their marginal a layer, as ``gpucomm advise --host this``
  times it) and the Python pace, once unpinned (the process's own affinity) and once pinned (every thread of the
  process on ``--cpu``, as ``taskset -c`` pins a whole process), the order alternating between rounds.

The report splits the variance of the log of the sweep's paces into the part common to every CPU in a round
(time), the part fixed per CPU (place) and the rest, and compares the spread of the op marginal and the Python
pace pinned and unpinned.  A pinned spread near the unpinned one, and a variance that is mostly time, say that
pinning does not help here.

Usage (one GPU of the shipped profile's model)::

    PYTHONPATH=src python benchmarks/host_pin.py --seconds 80 --out benchmarks/results/host-pin_h200x1_DATE.txt
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import math
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))  # run from the tree, as the GPU machine does (PYTHONPATH=src)

from host_speed import python_work, rate  # noqa: E402  (the same workload and timer as host_speed.py)


def _set_all_threads(cpus: set[int]) -> None:
    """Every thread of this process on ``cpus`` (``taskset -c`` pins a whole process; CUDA's backward runs on
    autograd's own thread, which a main-thread-only pin would leave free)."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended since the listing
            os.sched_setaffinity(int(tid), cpus)


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Inside: every thread of the process on ``cpu`` (``None``: left as it is); after: the affinity before."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    _set_all_threads({cpu})
    try:
        yield
    finally:
        _set_all_threads(before)


def variance_split(paces: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """Shares of the variance of ``log(pace)`` over a rounds x CPUs table that are the rounds' own (every CPU
    moving together in time), the CPUs' own (fixed by place) and the rest: the two-way analysis of variance
    without replication, each sum of squares over the total.  A table with no variance is all rest (0, 0, 1)."""
    logs = [[math.log(p) for p in row] for row in paces]
    n_r, n_c = len(logs), len(logs[0])
    grand = sum(map(sum, logs)) / (n_r * n_c)
    rows = [sum(r) / n_c for r in logs]
    cols = [sum(r[c] for r in logs) / n_r for c in range(n_c)]
    total = sum((x - grand) ** 2 for r in logs for x in r)
    if total <= 0.0:
        return 0.0, 0.0, 1.0
    ss_r = n_c * sum((m - grand) ** 2 for m in rows)
    ss_c = n_r * sum((m - grand) ** 2 for m in cols)
    return ss_r / total, ss_c / total, max(0.0, total - ss_r - ss_c) / total


def spread(xs: Sequence[float]) -> tuple[float, float]:
    """(max / min, median absolute deviation / median) of positive ``xs``."""
    med = statistics.median(xs)
    return max(xs) / min(xs), statistics.median(abs(x - med) for x in xs) / med


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=80.0, help="rounds until this long has passed (default 80)")
    ap.add_argument("--window", type=float, default=0.3, help="seconds of each Python-pace timing (default 0.3)")
    ap.add_argument("--sweep", type=float, default=0.1, help="seconds of the workload on each CPU (default 0.1)")
    ap.add_argument("--cpu", type=int, help="the CPU the pinned arm runs on (default: the highest-numbered CPU "
                                            "of the process's affinity; CPU 0 takes most interrupts)")
    ap.add_argument("--hardware", default="h200-nvswitch")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    if min(args.seconds, args.window, args.sweep) <= 0:
        print(f"host_pin: error: --seconds/--window/--sweep: expected positive seconds, but got {args.seconds}/"
              f"{args.window}/{args.sweep}", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1] if args.cpu is None else args.cpu
    if cpu not in cpus:
        print(f"host_pin: error: --cpu: expected one of this process's CPUs {cpus[0]}-{cpus[-1]}, but got {cpu}; "
              f"leave it out for the highest-numbered", file=sys.stderr)
        return 2
    if len(cpus) < 2:
        print("host_pin: error: the process may run on one CPU only: nothing to compare (run it without taskset)",
              file=sys.stderr)
        return 2
    from _shipped import shipped_here

    prof = shipped_here(args.hardware, "host_pin")
    if prof is None:
        return 2
    from gpucomm import hostload
    from gpucomm.advisor.compute import measure, profile
    from gpucomm.advisor.compute.profile import layer_shape_of

    src = profile.ProfileSource(prof)
    a, b, there = src.host_steps()[("gpt", "op")]
    device = torch.device("cuda", torch.cuda.current_device())
    ctx = measure._Ctx(device, prof.precision, prof.software, busy=False, window_s=args.window)
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    def op_marginal() -> float:
        ta, tb = (measure.step_seconds(ctx, layer_shape_of(r["layer"]), r["vocab"], r["layers"],
                                       r.get("loss", "upcast"), expected=r["seconds"]) for r in (a, b))
        return src.marginal_s(a["layer"], a["vocab"], (a["layers"], ta), (b["layers"], tb))

    say("# Would pinning the process to one CPU steady a host-paced step? Pace by CPU; op step pinned and unpinned")
    say()
    say(f"command: python benchmarks/host_pin.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"date: {_dt.date.today().isoformat()}; device: {torch.cuda.get_device_name(device)}; torch "
        f"{torch.__version__}; CPUs {cpus[0]}-{cpus[-1]} ({len(cpus)}), pinned arm on CPU {cpu}; op step: GPT "
        f"{layer_shape_of(a['layer']).hidden}-wide {a['layers']} and {b['layers']} layers, marginal a layer "
        f"({there * 1e3:.2f} ms in the profile)")
    say()
    sweeps: list[list[float]] = []
    arms: dict[str, list[tuple[float, float]]] = {"unpinned": [], "pinned": []}
    steal = []
    t_end = time.perf_counter() + args.seconds
    try:
        while time.perf_counter() < t_end:
            snap = hostload.snapshot()
            row = []
            for c in cpus:
                with pinned(c):
                    row.append(rate(python_work, args.sweep))
            order = ("unpinned", "pinned") if len(sweeps) % 2 == 0 else ("pinned", "unpinned")
            got = {}
            for arm in order:
                with pinned(cpu if arm == "pinned" else None):
                    got[arm] = (rate(python_work, args.window), op_marginal())
            sweeps.append(row)  # a round counts once all of it ran
            for arm in order:
                arms[arm].append(got[arm])
            st = hostload.steal_since(snap)
            steal.append(st.most if st else float("nan"))
            torch.cuda.empty_cache()
    except KeyboardInterrupt:  # a timeout keeps the rounds done
        say("(interrupted: the rounds below are what finished)")
    if len(sweeps) < 3:
        say("fewer than three rounds: nothing to compare")
    else:
        allmed = statistics.median(p for r in sweeps for p in r)
        say(f"{len(sweeps)} rounds; the workload's median pace over every CPU and round {allmed:,.0f} calls/s; "
            f"steal on the most-stolen CPU per round {min(steal):.1%}-{max(steal):.1%}")
        say()
        say("| CPU | median pace (x all) | slowest round | fastest round | max/min over rounds |")
        say("|---:|---:|---:|---:|---:|")
        for j, c in enumerate(cpus):
            col = [r[j] for r in sweeps]
            say(f"| {c} | {statistics.median(col) / allmed:.2f} | {min(col) / allmed:.2f} | {max(col) / allmed:.2f} "
                f"| {max(col) / min(col):.2f}x |")
        say()
        t_share, c_share, rest = variance_split(sweeps)
        say(f"variance of log pace over rounds x CPUs: {t_share:.0%} the rounds' own (every CPU moving at once), "
            f"{c_share:.0%} the CPUs' own (fixed by place), {rest:.0%} the rest")
        say()
        say("| arm | python pace max/min | its MAD / median | op marginal median | max/min | MAD / median |")
        say("|---|---:|---:|---:|---:|---:|")
        for arm, rows in arms.items():
            py, op = [r[0] for r in rows], [r[1] for r in rows]
            (ps, pm), (os_, om) = spread(py), spread(op)
            say(f"| {arm} | {ps:.2f}x | {pm:.1%} | {statistics.median(op) * 1e3:.2f} ms | {os_:.2f}x | {om:.1%} |")
        say()
        un, pi = ([r[1] for r in arms[k]] for k in ("unpinned", "pinned"))
        say(f"pinned / unpinned: op marginal median x{statistics.median(pi) / statistics.median(un):.2f}, its "
            f"max/min {spread(pi)[0]:.2f}x against {spread(un)[0]:.2f}x, MAD/median {spread(pi)[1]:.1%} against "
            f"{spread(un)[1]:.1%}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
