"""Host instructions per plain call, counted by callgrind: gpucomm's Python work against torch's, repeatably.

Timing a few microseconds of Python on a shared machine is noise; counting the instructions a call executes
is not (callgrind's counts repeat to within a few instructions).  This script runs every case below inside
one ``valgrind --tool=callgrind`` process: each case is warmed up (30 calls), then called ``--calls`` times
inside ``functools.reduce``, and callgrind collects only inside ``functools.reduce``
(``--toggle-collect=functools_reduce``), dumping once per case (``--dump-after=functools_reduce``).  The
figure is instructions per call, loop included (the ``empty`` case is the loop alone).

torch.cuda.comm's C++ loops (``torch._C._broadcast_out``, ``_scatter_out``, ``_gather_out``) do not exist in a
CPU build, so on a machine without a GPU they are replaced, on every side, by one Python stand-in that
returns its outputs: the GPU route is taken and its C++ costs the same everywhere, so the difference between
two cases is the Python each side runs.  4 participants on ``cpu``, float32 tensors of 8 elements.  The
``dist.*`` cases run :mod:`gpucomm.dist` in a gloo process group of one whose torch.distributed collectives are
likewise one Python stand-in on every side (``td.*`` is the raw call), so the figure is gpucomm.dist's own Python;
they take gloo's routes (``op="avg"`` is a sum and then a division on gloo, torch's AVG on NCCL).

Usage::

    python benchmarks/host_instructions.py                       # every case, this tree's gpucomm
    python benchmarks/host_instructions.py --src /tmp/old/src    # another tree (before/after a change)
    python benchmarks/host_instructions.py --cases local.broadcast,comm.broadcast --calls 50

Prints one line per case (instructions per call) and the ratios the targets name: each ``comm.*`` case
against its ``torch.cuda.comm`` twin, each ``local.*`` plain method against the ``comm.*`` call it makes, and
the local broadcast, scatter and gather against ``torch.cuda.comm``'s twin as well.
Needs ``valgrind`` on the PATH; takes about a minute per tree on a 2-core machine (importing torch under
valgrind is most of it).
"""

from __future__ import annotations

import argparse
import functools
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable

N, NUMEL = 4, 8

CASES = ("empty", "tcc.broadcast", "tcc.scatter", "tcc.gather", "comm.broadcast", "comm.scatter", "comm.gather",
         "comm.reduce", "comm.all_reduce", "comm.all_gather", "comm.reduce_scatter", "local.broadcast",
         "local.scatter", "held.broadcast", "held.scatter", "local.gather", "local.reduce", "local.all_reduce", "local.all_gather",
         "local.reduce_scatter", "prepared.broadcast", "prepared.scatter", "prepared.gather", "prepared.reduce",
         "prepared.all_reduce", "raw.reduce", "raw.all_reduce", "raw.gather", "td.all_reduce", "dist.all_reduce",
         "td.all_reduce_avg", "dist.all_reduce_avg", "td.reduce", "dist.reduce", "td.broadcast", "dist.broadcast")
"""Every case, in the order they run and print."""

# case -> the case it is compared with (the ratio printed beside it)
PAIRS = {
    "comm.broadcast": "tcc.broadcast",
    "comm.scatter": "tcc.scatter",
    "comm.gather": "tcc.gather",
    "local.broadcast": "comm.broadcast",
    "local.scatter": "comm.scatter",
    "local.gather": "comm.gather",
    "local.reduce": "comm.reduce",
    "local.all_reduce": "comm.all_reduce",
    "local.all_gather": "comm.all_gather",
    "local.reduce_scatter": "comm.reduce_scatter",
    "comm.reduce": "raw.reduce",
    "comm.all_reduce": "raw.all_reduce",
    "dist.all_reduce": "td.all_reduce",
    "dist.all_reduce_avg": "td.all_reduce_avg",
    "dist.reduce": "td.reduce",
    "dist.broadcast": "td.broadcast",
}

# the Communicator's plain methods that torch.cuda.comm has a twin of (out= forms): a second ratio beside them
TORCH_TWINS = {"local.broadcast": "tcc.broadcast", "local.scatter": "tcc.scatter", "local.gather": "tcc.gather",
               "held.broadcast": "tcc.broadcast", "held.scatter": "tcc.scatter"}


def _stand_in(src, outs, *rest):
    """torch.cuda.comm's C++ loop, as far as the host is concerned here: it returns its outputs."""
    return outs


def _td_stand_in(*args, **kwargs):
    """A torch.distributed collective, as far as the host is concerned here: it returns (no work)."""
    return None


def _gloo_world_of_one():
    """A gloo process group of one on 127.0.0.1 with its collectives replaced by :func:`_td_stand_in` on every
    side (``gpucomm.dist`` calls them through the module, at call time): what differs is the Python around."""
    import socket

    import torch.distributed as td

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    td.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    for name in ("all_reduce", "reduce", "broadcast"):
        setattr(td, name, _td_stand_in)
    return td


def raw_all_reduce(ts: list) -> None:
    import torch

    torch.sum(torch.stack(ts), 0, dtype=torch.float32, out=ts[0])
    for t in ts[1:]:
        t.copy_(ts[0])


def _cuda_form_routes(comm) -> dict[str, Callable[..., object]]:
    """The LocalCommunicator's held routes (its plain broadcast and scatter) as they are generated for a
    communicator of CUDA devices, which reads no host tensor's size (a CPU participant's source may need pinned
    staging), made here for ``comm``'s CPU participants: the ``held.*`` cases are the Python a CUDA
    communicator's plain call runs; the ``local.*`` cases run the CPU communicator's own."""
    from gpucomm.collectives import COLLECTIVES
    from gpucomm.comm import _kernels
    from gpucomm.communicator.base import result_source

    held = comm._held_by
    routes = {}
    for name in ("broadcast", "scatter"):
        m = COLLECTIVES[name].method
        make = _kernels._route_maker(name, len(held.devices), m.params, tuple(m.defaults.items()),
                                     result_source(COLLECTIVES[name]), True)
        routes[name] = make({}, held.devices, (True,) * len(held.devices), getattr(type(comm), name).__get__(comm),
                            dict(m.defaults))
    return routes


def cases() -> dict[str, Callable[[], object]]:
    """Every case, as a zero-argument callable on buffers built here."""
    import torch

    for name in ("_broadcast_out", "_scatter_out", "_gather_out"):
        if not hasattr(torch._C, name):  # a CPU build: the GPU route, with one stand-in on every side
            setattr(torch._C, name, _stand_in)
    import torch.cuda.comm as tcc

    import gpucomm.comm as gc
    from gpucomm.communicator import LocalCommunicator

    comm = LocalCommunicator(["cpu"] * N)
    ts = [torch.zeros(NUMEL) for _ in range(N)]
    small = [torch.zeros(NUMEL // N) for _ in range(N)]
    big = [torch.zeros(NUMEL) for _ in range(N)]
    td = _gloo_world_of_one()
    import gpucomm.dist as gd

    d, SUM = torch.zeros(NUMEL), td.ReduceOp.SUM
    held = _cuda_form_routes(comm)
    prepared = {op: comm.prepare(op, *args) for op, args in (
        ("broadcast", (ts, 0)), ("scatter", (small, big, 0)), ("gather", (big, small, 0)),
        ("reduce", (ts, 0, "sum")), ("all_reduce", (ts, "sum")))}
    return {
        "empty": lambda: None,
        "tcc.broadcast": lambda: tcc.broadcast(ts[0], out=ts[1:]),
        "tcc.scatter": lambda: tcc.scatter(big[0], out=small),
        "tcc.gather": lambda: tcc.gather(small, out=big[0]),
        "comm.broadcast": lambda: gc.broadcast(ts[0], out=ts[1:]),
        "comm.scatter": lambda: gc.scatter(big[0], out=small),
        "comm.gather": lambda: gc.gather(small, 0, out=big[0]),
        "comm.reduce": lambda: gc.reduce(ts, None, "sum", out=ts[0]),
        "comm.all_reduce": lambda: gc.all_reduce(ts, "sum", out=ts),
        "comm.all_gather": lambda: gc.all_gather(small, out=big),
        "comm.reduce_scatter": lambda: gc.reduce_scatter(big, 0, "sum", out=small),
        "local.broadcast": lambda: comm.broadcast(ts, 0),
        "local.scatter": lambda: comm.scatter(small, big, 0),
        "held.broadcast": lambda: held["broadcast"](ts, 0),
        "held.scatter": lambda: held["scatter"](small, big, 0),
        "local.gather": lambda: comm.gather(big, small, 0),
        "local.reduce": lambda: comm.reduce(ts, 0, "sum"),
        "local.all_reduce": lambda: comm.all_reduce(ts, "sum"),
        "local.all_gather": lambda: comm.all_gather(big, small),
        "local.reduce_scatter": lambda: comm.reduce_scatter(small, big, "sum"),
        **{f"prepared.{op}": p for op, p in prepared.items()},
        # the torch ops the one-device routes run, with no Python around them: what is left is ours
        "raw.reduce": lambda: torch.sum(torch.stack(ts), 0, dtype=torch.float32, out=ts[0]),
        "raw.all_reduce": lambda: raw_all_reduce(ts),
        "raw.gather": lambda: torch.cat(small, 0, out=big[0]),
        # gpucomm.dist against the raw torch.distributed call it makes (gloo's routes: avg is a sum, then a division)
        "td.all_reduce": lambda: td.all_reduce(d, SUM),
        "dist.all_reduce": lambda: gd.all_reduce(d, "sum"),
        "td.all_reduce_avg": lambda: (td.all_reduce(d, SUM), d.div_(1)),
        "dist.all_reduce_avg": lambda: gd.all_reduce(d, "avg"),
        "td.reduce": lambda: td.reduce(d, 0, SUM),
        "dist.reduce": lambda: gd.reduce(d, 0, "sum"),
        "td.broadcast": lambda: td.broadcast(d, 0),
        "dist.broadcast": lambda: gd.broadcast(d, 0),
    }


def child(names: list[str], calls: int) -> None:
    """Inside valgrind: warm every case up, then one functools.reduce per case (one callgrind dump each)."""
    table = cases()
    picked = [table[n] for n in names]
    for fn in picked:
        for _ in range(30):
            fn()
    for fn in picked:
        functools.reduce(lambda acc, _, fn=fn: fn(), range(calls), None)


def _totals(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals line")


def measure(names: list[str], calls: int, src: str | None) -> dict[str, float]:
    """Instructions per call of each case, in one valgrind run."""
    if shutil.which("valgrind") is None:
        raise SystemExit("host_instructions: valgrind is not on the PATH (apt-get install valgrind)")
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.abspath(src), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
               "--dump-after=functools_reduce", f"--callgrind-out-file={out}", sys.executable, __file__,
               "--child", "--cases", ",".join(names), "--calls", str(calls)]
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            raise SystemExit(f"host_instructions: the run under valgrind failed:\n{done.stderr[-3000:]}")
        dumps = sorted(glob.glob(out + ".*"), key=lambda p: int(re.findall(r"\.(\d+)$", p)[0]))
        if len(dumps) != len(names):
            raise RuntimeError(f"expected {len(names)} callgrind dumps, found {len(dumps)}")
        return {n: _totals(p) / calls for n, p in zip(names, dumps, strict=True)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", help="comma list (default: every case)")
    p.add_argument("--calls", type=int, default=100, help="calls counted per case (default 100)")
    p.add_argument("--src", help="a gpucomm source tree to measure instead of the installed one (its src/)")
    p.add_argument("--out", help="also write the table, with the command that made it, to this file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    every = list(CASES)
    names = args.cases.split(",") if args.cases else every
    if args.child:
        child(names, args.calls)
        return 0
    unknown = sorted(set(names) - set(every))
    if unknown or args.calls < 1:
        print(f"host_instructions: unknown cases {unknown} (choose from {every}), or --calls < 1", file=sys.stderr)
        return 2
    counts = measure(names, args.calls, args.src)
    import torch

    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    lines = [f"# command: {command}",
             f"# instructions per call (callgrind), {N} x cpu, {NUMEL} float32; torch {torch.__version__}, Python "
             f"{sys.version.split()[0]}; src: {args.src or 'installed'}",
             "# torch.cuda.comm's C++ loops are one Python stand-in on every side (a CPU build has none): the "
             "figures are the Python each side runs around them",
             "# ratio: the case against the one named beside it (tcc = torch.cuda.comm, raw = the torch ops alone)"]
    for n in names:
        base = PAIRS.get(n)
        ratio = f"  {counts[n] / counts[base]:.2f}x {base}" if base in counts else ""
        twin = TORCH_TWINS.get(n)
        if twin in counts:
            ratio += f"  {counts[n] / counts[twin]:.2f}x {twin}"
        lines.append(f"{n:24s} {counts[n]:>10,.0f}{ratio}")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
