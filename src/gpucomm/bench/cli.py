"""``gpucomm bench``: collectives side by side — torch.cuda.comm, gpucomm.comm, torch.distributed, gpucomm.dist.

Usage::

    gpucomm bench                                 # all that applies here
    gpucomm bench --ops all_reduce,all_gather -b 1K -e 1G -f 2 -d bf16
    gpucomm bench --backends gpucomm.comm,torch.cuda.comm --devices 0,0,0,0
    torchrun --nproc-per-node 8 -m gpucomm bench  # process groups, all ranks

Method (docs/performance.md), as nccl-tests measures: sizes from ``-b`` to ``-e``, times ``-f`` each
step (K/M/G suffixes); ``-w`` untimed warmup iterations, then ``-n`` timed ones per row with rotating
buffers; CUDA events on GPU (``--cuda-graph`` times graph replays, labelled in every row), the host
clock on CPU; median and p99; algbw and busbw; every row checked exactly (``-c``, ``#wrong``); speedup
against torch.cuda.comm (one process) or raw torch.distributed (process groups).

Where it runs: all visible GPUs (one GPU: 4 slots of cuda:0 for the one-process backends, world size 1
for the process-group ones); with no GPU, 4 CPU slots and gloo with 2–4 processes, labelled as CPU
numbers.  Under torchrun only the process-group backends run; rank 0 writes.

Output: ``--out DIR`` (default a new ``gpucomm-results/bench-<UTC yyyymmdd-hhmmss>-<pid>/``; a DIR that
holds result directories, such as ``gpucomm-results``, gets a new one inside it) gets
``records.jsonl`` (an env block, then one row per line, each written as it finishes) and the report.
Ctrl-C or SIGTERM keeps every finished row and still writes the report; a second Ctrl-C while it is
written is ignored.

Refused before any work, in one line (exit 2, nothing written): sizes whose buffers do not fit in the
free memory of the devices used (host memory for CPU participants, free GPU memory for GPUs; the
message gives what is needed and what is there), devices that do not exist, and bad flag values.

Exit status: 0 ok; 1 a row was wrong, a backend failed, or ``--min-busbw`` was missed; 2 usage error;
130 interrupted (rows and report kept).
"""

from __future__ import annotations

import argparse
import os
import sys
import types
from pathlib import Path

from gpucomm import collectives
from gpucomm._interrupts import ignore_interrupts, interrupts
from gpucomm.bench import backends as _backends
from gpucomm.bench.config import DTYPES, BenchConfig, defaults_for, parse_dtype
from gpucomm.bench.sizes import parse_size, size_sweep
from gpucomm.collectives import ReduceOp, parse_op

__all__ = ["UsageError", "add_parser", "config_from_args", "run"]

class UsageError(ValueError):
    """A bad flag value: printed as one line, exit status 2."""


def _one_line_error(self: argparse.ArgumentParser, message: str) -> None:
    self.exit(2, f"{self.prog}: error: {message}\n")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``gpucomm bench`` and return its parser."""
    p = subparsers.add_parser("bench", help="measure collectives side by side (nccl-tests method)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = types.MethodType(_one_line_error, p)
    s = p.add_argument_group("sizes (bytes; K/M/G suffixes = 2^10/2^20/2^30)")
    s.add_argument("-b", "--minbytes", help="smallest size (default 8)")
    s.add_argument("-e", "--maxbytes", help="largest size (default 256M on CUDA, 4M on CPU)")
    s.add_argument("-f", "--stepfactor", type=int, help="multiply the size by this each step (default 4 CUDA, 8 CPU)")
    w = p.add_argument_group("what to measure")
    w.add_argument("--ops", default="all", help=f"collectives, comma-separated, or all: {', '.join(collectives.names())}")
    w.add_argument("--backends", default="all", help=f"comma-separated, or all: {', '.join(_backends.BACKENDS)}")
    w.add_argument("-d", "--dtype", default="float32", help=f"comma-separated, or all: {', '.join(DTYPES)}")
    w.add_argument("-o", "--op", default="sum", help="reduction ops, comma-separated, or all: sum, avg, max, min, prod")
    w.add_argument("-r", "--root", type=int, default=0, help="root participant of rooted collectives (default 0)")
    w.add_argument("--devices", help="one-process participants, e.g. 0,1,2,3 or 0,0,0,0 or cpu,cpu (default: all GPUs; "
                                     "one GPU: 4 slots of cuda:0; no GPU: 4 CPU slots)")
    w.add_argument("--nproc", type=int, help="processes for the process-group backends (default: one per GPU; "
                                             "CPU: 2-4); at most what the machine holds (4 per core, 512 MiB each)")
    w.add_argument("--oversubscribe", action="store_true",
                   help="expert: start more CPU processes than --nproc's limit allows (they will contend)")
    t = p.add_argument_group("method")
    t.add_argument("-n", "--iters", type=int, help="timed iterations per row (default 20)")
    t.add_argument("-w", "--warmup-iters", type=int, help="untimed warmup iterations per row (default 5 CUDA, 3 CPU)")
    t.add_argument("-c", "--check", type=int, default=1, help="correctness-check iterations per row; 0 = off (default 1)")
    t.add_argument("--cuda-graph", action="store_true", help="time CUDA-graph replays (labelled cuda-graph)")
    t.add_argument("--timeout", type=float, default=600.0,
                   help="seconds the process-group phase may take, a finite number > 0 (default 600)")
    o = p.add_argument_group("output")
    o.add_argument("--out", help="result directory (default: a new gpucomm-results/bench-<UTC time>-<pid>/); "
                                 "refused while another run writes there")
    o.add_argument("--min-busbw", type=float, metavar="GBPS",
                   help="exit 1 if a series' busbw at its largest size is below GBPS")
    return p


# ----- parse → typed config --------------------------------------------------------------------------
def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _ops(text: str) -> tuple[collectives.CollectiveName, ...]:
    if text.strip().lower() == "all":
        return tuple(collectives.COLLECTIVES)
    try:
        return tuple(dict.fromkeys(collectives.get(x).name for x in _split(text)))
    except ValueError as exc:
        raise UsageError(f"--ops: {exc}") from None


def _reduce_ops(text: str) -> tuple[ReduceOp, ...]:
    if text.strip().lower() == "all":
        return tuple(ReduceOp)
    return tuple(dict.fromkeys(parse_op(x, arg="--op") for x in _split(text)))


def _dtypes(text: str):
    if text.strip().lower() == "all":
        return tuple(parse_dtype(x) for x in DTYPES)
    return tuple(dict.fromkeys(parse_dtype(x) for x in _split(text)))


def _backend_names(text: str, device_type: str, torchrun: bool) -> tuple[tuple[str, ...], bool]:
    """(backends to run, in display order; whether the user named them)."""
    table = _backends.BACKENDS
    if text.strip().lower() == "all":
        names = [name for name, b in table.items()
                 if (b.device_type in (None, device_type)) and not (torchrun and b.scope == _backends.PROCESS)]
        return tuple(names), False
    names = _split(text)
    for name in names:
        b = table.get(name)
        if b is None:
            raise UsageError(f"--backends: unknown backend {name!r}; expected one of {', '.join(table)} (or all)")
        if b.device_type not in (None, device_type):
            raise UsageError(f"--backends: {name} needs {b.device_type.upper()} devices, but this run is on "
                             f"{device_type.upper()}; drop it")
        if torchrun and b.scope == _backends.PROCESS:
            raise UsageError(f"--backends: {name} is a one-process backend; under torchrun only "
                             f"{', '.join(_backends.PROCESS_GROUP_BACKENDS)} run")
    return tuple(sorted(dict.fromkeys(names), key=lambda x: table[x].order)), True


def _devices(text: str | None):
    from gpucomm.devices import cuda_device_count, default_devices, parse_devices

    if text is None:
        return tuple(default_devices(4) if cuda_device_count() == 1 else default_devices())
    try:
        devices = parse_devices(_split(text), arg="--devices")
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if not devices:
        raise UsageError("--devices: expected at least one device, e.g. 0,0,0,0 or cpu,cpu")
    if len({d.type for d in devices}) > 1:
        raise UsageError(f"--devices: expected devices of one type, but got {', '.join(map(str, devices))}")
    count = cuda_device_count()
    for d in devices:
        if d.type == "cuda" and d.index >= count:
            raise UsageError(f"--devices: {d} does not exist ({count} CUDA device(s) visible)")
    return tuple(devices)


def _torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def config_from_args(args: argparse.Namespace) -> tuple[BenchConfig, bool]:
    """Build the run's :class:`BenchConfig` (and whether backends were named); UsageError on bad flags."""
    torchrun = _torchrun()
    try:
        devices = _devices(args.devices)
        device_type = devices[0].type
        d = defaults_for(device_type)
        minbytes = parse_size(args.minbytes if args.minbytes is not None else d.minbytes, "--minbytes")
        maxbytes = parse_size(args.maxbytes if args.maxbytes is not None else d.maxbytes, "--maxbytes")
        if args.minbytes is not None and args.maxbytes is None:
            maxbytes = max(maxbytes, minbytes)
        step = args.stepfactor if args.stepfactor is not None else d.stepfactor
        if minbytes > maxbytes:
            raise UsageError(f"--minbytes {minbytes} is larger than --maxbytes {maxbytes}; swap them")
        sizes = size_sweep(minbytes, maxbytes, step)
        backend_names, named = _backend_names(args.backends, device_type, torchrun)
        nproc = int(os.environ["WORLD_SIZE"]) if torchrun else (args.nproc if args.nproc is not None else d.nproc)
        cfg = BenchConfig(
            ops=_ops(args.ops), backends=backend_names, sizes=tuple(sizes), dtypes=_dtypes(args.dtype),
            reduce_ops=_reduce_ops(args.op), iters=args.iters if args.iters is not None else d.iters,
            warmup=args.warmup_iters if args.warmup_iters is not None else d.warmup, check=args.check,
            device_type=device_type, devices=devices, nproc=nproc, root=args.root, cuda_graph=args.cuda_graph,
            min_busbw=args.min_busbw, timeout=args.timeout,
        )
    except UsageError:
        raise
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    _check_root(cfg, torchrun)
    _check_nproc(cfg, torchrun, getattr(args, "oversubscribe", False))
    return cfg, named


def _scopes(cfg: BenchConfig) -> set[str]:
    return {_backends.BACKENDS[b].scope for b in cfg.backends}


def _check_root(cfg: BenchConfig, torchrun: bool) -> None:
    rooted = any(collectives.get(op).has_root for op in cfg.ops)
    counts = []
    if not torchrun and _backends.PROCESS in _scopes(cfg):
        counts.append(len(cfg.devices))
    if _backends.GROUP in _scopes(cfg):
        counts.append(cfg.nproc)
    if rooted and counts and cfg.root >= min(counts):
        raise UsageError(f"--root: expected a participant index below {min(counts)}, but got {cfg.root}")


def nproc_limit() -> tuple[int, str]:
    """The most local processes this machine can hold for a CPU (gloo) run, and why.

    Each rank is a full torch process (about 300 MB resident on CPU, more with CUDA) that needs a core
    to make progress in step with the others: allow 4 per core and one per 512 MiB of available memory.
    """
    import psutil

    cores = os.cpu_count() or 1
    memory = psutil.virtual_memory().available
    by_cores, by_memory = 4 * cores, max(1, memory // (512 << 20))
    if by_memory < by_cores:
        return int(by_memory), f"{memory / 2**30:.1f} GiB of available memory at 512 MiB a process"
    return by_cores, f"{cores} CPU core(s) at 4 processes a core"


def _check_nproc(cfg: BenchConfig, torchrun: bool, oversubscribe: bool) -> None:
    if torchrun or _backends.GROUP not in _scopes(cfg):
        return
    if cfg.device_type == "cuda" and cfg.nproc > _cuda_count():
        raise UsageError(f"--nproc: NCCL needs one GPU per process, but {cfg.nproc} processes were asked for and "
                         f"{_cuda_count()} GPU(s) are visible; lower --nproc")
    if cfg.device_type == "cpu" and not oversubscribe:
        limit, why = nproc_limit()
        if cfg.nproc > limit:
            raise UsageError(f"--nproc: {cfg.nproc} processes is more than this machine holds ({limit}: {why}); "
                             f"lower --nproc, or add --oversubscribe to start them anyway")


def _cuda_count() -> int:
    from gpucomm.devices import cuda_device_count

    return cuda_device_count()


def _out_dir(text: str | None) -> Path:
    """The result directory, created and proven writable now (a usage error otherwise).

    Called only after every other flag has been checked, so a usage error writes nothing.
    """
    from gpucomm.records import out_problem, run_dir_for

    try:
        path = run_dir_for("bench", text)  # a new bench-<UTC>-<pid>/ unless --out names a run's own directory
    except OSError as exc:
        raise UsageError(f"--out {text or 'gpucomm-results'!r}: cannot write results there "
                         f"({exc.strerror or exc}); choose a writable directory") from None
    problem = out_problem(path)
    if problem:
        raise UsageError(f"--out {str(path)!r}: {problem}")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _memory_refusal(session) -> str | None:
    """Why the run's buffers cannot fit (:mod:`gpucomm.bench.memory`), or None.

    Under torchrun each rank would judge its own device and a refusal on one rank would leave the
    others waiting, so there the check is left to the launcher's job (and the allocator's message).
    """
    if _torchrun():
        return None
    from gpucomm.bench import memory

    _, local_points, group_points, _ = session.plan()
    return memory.refusal(session.cfg, local_points, group_points)


def run(args: argparse.Namespace) -> int:
    """Run ``gpucomm bench``; returns the exit status."""
    from gpucomm.bench.session import Session

    try:
        cfg, named = config_from_args(args)
        session = Session(cfg, None, named_backends=named, torchrun=_torchrun())
        problem = session.nothing_to_measure() or _memory_refusal(session)
        if problem:
            raise UsageError(problem)
        rank0 = not _torchrun() or os.environ.get("RANK") == "0"
        session.out = _out_dir(args.out) if rank0 else None
    except UsageError as exc:
        print(f"gpucomm bench: error: {exc}", file=sys.stderr)
        return 2
    with interrupts():  # the first Ctrl-C/SIGTERM stops the run; later ones cannot stop the report
        try:
            return session.run()
        except KeyboardInterrupt:  # one that came outside the session's own handling (e.g. in the report)
            ignore_interrupts()
            print(f"gpucomm bench: interrupted; {len(session.records)} finished rows are in {session.out}",
                  file=sys.stderr)
            return 130
