"""The process-group phase: ``torch.distributed`` and ``gpucomm.dist`` rows, one participant per rank.

Two ways in:

* :func:`run_spawned` — ``gpucomm bench`` starts ``nproc`` local workers with
  :func:`gpucomm.dist.launch`.  Rank 0 appends each finished row to a stream file as JSON (flushed per
  row) *and* returns all rows; the parent reads the stream while the workers run, so the live table
  grows and an interrupted run keeps every row finished so far, then checks the returned rows against
  what it streamed.
* :func:`run_here` — under ``torchrun`` (this process is already one rank): the same loop in this
  process; rank 0 emits the rows directly.

Each rank times its own iterations; iteration times are combined with a MAX over ranks and #wrong
with a SUM (``docs/performance.md`` §3.4), using raw ``torch.distributed`` outside the timed region.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as td

from gpucomm.bench import adapters as _adapters
from gpucomm.bench import backends as _backends
from gpucomm.bench.config import BenchConfig
from gpucomm.bench.runner import plan, run_points, unsupported_reasons
from gpucomm.dist.process_group import backend_for
from gpucomm.records import BenchRecord, parse_row, to_row

__all__ = ["run_here", "run_spawned", "worker"]

Emit = Callable[[BenchRecord], None]


def _combine(device: torch.device):
    def combine(times: list[float], wrong: int) -> tuple[list[float], int]:
        t = torch.tensor(times, dtype=torch.float64, device=device)
        td.all_reduce(t, op=td.ReduceOp.MAX)
        w = torch.tensor([max(wrong, 0)], dtype=torch.int64, device=device)
        td.all_reduce(w, op=td.ReduceOp.SUM)
        return t.tolist(), (int(w.item()) if wrong >= 0 else -1)

    return combine


def _build_backends(cfg: BenchConfig, device: torch.device) -> tuple[dict, list[str]]:
    """Adapters that could be built here, and one line per backend that could not (same on every rank)."""
    built, problems = {}, []
    for name, backend in _backends.BACKENDS.items():
        if name not in cfg.backends or backend.scope != _backends.GROUP:
            continue
        try:
            built[name] = _adapters.build(name, device)
        except (ImportError, AttributeError, NotImplementedError) as exc:
            problems.append(f"{name}: not run ({type(exc).__name__}: {exc})")
    return built, problems


def _loop(cfg: BenchConfig, emit: Emit) -> dict[str, Any]:
    """Run every process-group point in this rank; rank 0's ``emit`` gets the rows."""
    from gpucomm.dist import device as dist_device

    device = dist_device()
    rank, world = td.get_rank(), td.get_world_size()
    built, problems = _build_backends(cfg, device)
    specs = [a.spec for a in built.values()]
    forms = {a.name: a.forms for a in built.values()}
    points = plan(cfg, specs, world, forms)

    def emit_rank0(record: BenchRecord) -> None:
        if rank == 0:
            emit(record)

    skipped = unsupported_reasons(cfg, specs, forms)

    def on_skip(point, exc: BaseException) -> None:
        how = "in graph form" if point.form == _backends.GRAPH else "under cuda-graph"
        skipped.append(f"{point.backend} {point.case.op} {how} from {point.case.size} B "
                       f"(capture failed: {exc})")

    run_points(points, built, cfg, emit_rank0, combine=_combine(device), on_skip=on_skip)
    return {"problems": problems, "skipped": skipped, "planned": len(points)}


def worker(cfg: BenchConfig, stream_path: str) -> dict[str, Any] | None:
    """The body of each spawned rank: rows go to ``stream_path`` (rank 0) and back to the parent."""
    rows: list[dict] = []
    with open(stream_path, "a", encoding="utf-8") as stream:
        def emit(record: BenchRecord) -> None:
            row = to_row(record)
            rows.append(row)
            stream.write(json.dumps(row, allow_nan=False) + "\n")
            stream.flush()

        summary = _loop(cfg, emit)
    return {**summary, "rows": rows} if td.get_rank() == 0 else None


class _StreamReader:
    """Complete lines appended to a file since the last call (a partial last line waits)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.count = path, 0, 0

    def new_rows(self) -> list[dict]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        rows = [json.loads(line) for line in data[:end].decode("utf-8").splitlines() if line.strip()]
        self.count += len(rows)
        return rows


def run_spawned(cfg: BenchConfig, emit: Emit, stream_path: Path, poll_s: float = 0.2) -> dict[str, Any]:
    """Spawn ``cfg.nproc`` ranks and emit their rows as they arrive; returns rank 0's summary.

    Raises whatever the launch raised (:class:`gpucomm.dist.LaunchError` names the failed rank).
    A KeyboardInterrupt while waiting emits the rows streamed so far, then propagates; the workers
    die with this process (the launcher sets ``PR_SET_PDEATHSIG``).
    """
    from gpucomm.dist import launch

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = launch(worker, cfg.nproc, cfg, str(stream_path), backend=_backend_for(cfg),
                                      timeout=cfg.timeout)
        except BaseException as exc:  # handed to the main thread below
            outcome["error"] = exc

    reader = _StreamReader(stream_path)
    before = _children()
    thread = threading.Thread(target=target, name="gpucomm-bench-launch", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(poll_s)
            for row in reader.new_rows():
                emit(parse_row(row))
    except BaseException:
        # Interrupted: stop the workers this launch started (multiprocessing would otherwise wait for
        # them at exit), then keep whatever they finished.
        _stop(_children() - before)
        raise
    finally:
        for row in reader.new_rows():
            emit(parse_row(row))
    if "error" in outcome:
        raise outcome["error"]
    summary = outcome["value"][0]
    returned = summary.pop("rows")
    for row in returned[reader.count:]:  # rows the stream lost, if any
        emit(parse_row(row))
    return summary


def _children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children()}


def _stop(pids: set[int], grace_s: float = 3.0) -> None:
    """SIGTERM the given child processes, then SIGKILL those still alive after ``grace_s``."""
    import psutil

    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            proc.terminate()
            procs.append(proc)
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=grace_s)


def run_here(cfg: BenchConfig, emit: Emit) -> dict[str, Any]:
    """Under torchrun: start the group from the environment, run the loop, shut the group down."""
    from gpucomm import dist as gdist

    with gdist.init(backend=_backend_for(cfg)):
        return _loop(cfg, emit)


def _backend_for(cfg: BenchConfig) -> str:
    """The run's device type decides (gloo for CPU runs even on a machine with GPUs: the rows say "cpu")."""
    return backend_for(cfg.device_type)
