"""One ``gpucomm bench`` run from a config to records, report and exit status.

The order of a run: env block → one-process phase (torch.cuda.comm, gpucomm.comm) in this process →
process-group phase (torch.distributed, gpucomm.dist) in spawned ranks, or in this rank under
torchrun → report.  Every row passes through :meth:`Session.emit`: ratio filled in
(:class:`~gpucomm.bench.metrics.SpeedupIndex`), written and fsync'ed (:class:`RecordWriter`), shown.
An interruption (Ctrl-C, SIGTERM) stops measuring; the rows already written stay and the report is
still built.
"""

from __future__ import annotations

import collections
import sys
import traceback
from pathlib import Path

from rich.console import Console

from gpucomm import collectives
from gpucomm.bench import adapters as _adapters
from gpucomm.bench import backends as _backends
from gpucomm.bench import pg
from gpucomm.bench.config import BenchConfig
from gpucomm.bench.display import LiveView, make_console
from gpucomm.bench.metrics import SpeedupIndex
from gpucomm.bench.runner import Point, plan, run_points, unsupported_reasons
from gpucomm.bench.sizes import format_size
from gpucomm.env import collect_env
from gpucomm.records import BenchRecord, RecordWriter

__all__ = ["Session", "min_busbw_failures"]

_INTERRUPTED = 130
_USAGE = 2
_STREAM_FILE = ".process-group-rows.jsonl"


def min_busbw_failures(records: list[BenchRecord], floor: float) -> list[BenchRecord]:
    """Per series (backend, form, op, dtype, redop, placement, timing), the largest-size row if busbw < floor.

    Series whose busbw factor is 0 (n = 1 for (n-1)/n collectives) are left out: they move no bytes
    across a bus.
    """
    last: dict[tuple, BenchRecord] = {}
    for r in records:
        key = (r.backend, r.form, r.op, r.dtype, r.reduce_op, r.placement, r.timing)
        if key not in last or r.size >= last[key].size:
            last[key] = r
    return [r for r in last.values()
            if collectives.get(r.op).busbw_factor(r.n) > 0 and r.busbw_gbps < floor]


class Session:
    """State of one run: the writer, the live view, every row so far and every problem met."""

    def __init__(self, cfg: BenchConfig, out: Path | None, *, named_backends: bool = False,
                 torchrun: bool = False, console: Console | None = None) -> None:
        self.cfg, self.out, self.named, self.torchrun = cfg, out, named_backends, torchrun
        self.console = console or make_console()
        self.records: list[BenchRecord] = []
        self.problems: list[str] = []
        self.ratios = SpeedupIndex()
        self.writer: RecordWriter | None = None
        self.view: LiveView | None = None
        self.report_written = False
        """Whether report.md was written (the answer points to it only then)."""

    # ----- rows ---------------------------------------------------------------------------------------
    def emit(self, record: BenchRecord) -> None:
        record = self.ratios.apply(record)
        self.records.append(record)
        if self.writer is not None:
            self.writer.write(record)
        if self.view is not None:
            self.view.add(record)

    def _problem(self, text: str, *, failure: bool = True) -> None:
        if failure:
            self.problems.append(text)
        self.console.print(f"[yellow]{text}[/yellow]" if failure else f"[dim]{text}[/dim]", highlight=False)

    # ----- the run ------------------------------------------------------------------------------------
    def _title(self) -> str:
        cfg = self.cfg
        if cfg.device_type == "cpu":
            return "CPU numbers (no GPU used)"
        return f"CUDA, {cfg.timing}"

    def _names(self, scope: str) -> list[str]:
        """The run's backends of one scope, in display order."""
        return [b for b in self.cfg.backends if _backends.BACKENDS[b].scope == scope]

    def _preamble(self) -> None:
        cfg = self.cfg
        local, group = self._names(_backends.PROCESS), self._names(_backends.GROUP)
        lines = [f"gpucomm bench: sizes {format_size(cfg.sizes[0])} .. {format_size(cfg.sizes[-1])} "
                 f"({len(cfg.sizes)} sizes), {cfg.iters} iterations, {cfg.warmup} warmup, timing {cfg.timing}"]
        if cfg.device_type == "cpu":
            lines.append("[bold]No GPU used: these are CPU numbers[/bold] (CPU tensors and gloo), not GPU figures.")
        if local and not self.torchrun:
            lines.append(f"one process: {', '.join(local)} on {len(cfg.devices)} participants "
                         f"({', '.join(map(str, cfg.devices))})")
        if group:
            how = "torchrun ranks" if self.torchrun else "spawned processes"
            lines.append(f"process groups: {', '.join(group)} with {cfg.nproc} {how} "
                         f"({'nccl' if cfg.device_type == 'cuda' else 'gloo'})")
        if self.out is not None:
            lines.append(f"records: {self.out / 'records.jsonl'}")
        for line in lines:
            self.console.print(line, highlight=False)

    def plan(self, forms: dict[str, tuple[str, ...]] | None = None
             ) -> tuple[list[str], list[Point], list[Point], list[str]]:
        """(one-process backend names, their points, process-group points, unsupported lines).

        ``forms`` narrows the one-process backends to the forms their built adapters offer.
        """
        cfg = self.cfg
        local_names = [] if self.torchrun else self._names(_backends.PROCESS)
        local = [_backends.BACKENDS[b] for b in local_names]
        group = [_backends.BACKENDS[b] for b in self._names(_backends.GROUP)]
        return (local_names, plan(cfg, local, len(cfg.devices), forms), plan(cfg, group, cfg.nproc),
                unsupported_reasons(cfg, local, forms) + unsupported_reasons(cfg, group))

    def nothing_to_measure(self) -> str | None:
        """Why this run would measure nothing (a usage error, found before anything is written), or None."""
        _, local_points, group_points, unsupported = self.plan()
        if local_points or group_points:
            return None
        return ("nothing to measure: " + ("; ".join(unsupported) or "every size is too small for the selected ops")
                + "; widen --ops, --backends or the sizes")

    def run(self) -> int:
        rank0 = self.out is not None
        problem = self.nothing_to_measure()
        if problem:
            print(f"gpucomm bench: error: {problem}", file=sys.stderr)
            return _USAGE
        status = 0
        try:
            if rank0:
                env = collect_env(self.cfg.device_type, extra=self.cfg.params())
                try:
                    self.writer = RecordWriter(self.out, env)
                except Exception as exc:  # unwritable, or held by another live run (RecordWriter's lock)
                    print(f"gpucomm bench: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                          file=sys.stderr)
                    return _USAGE
                self._preamble()
            adapters = self._build_local()
            local_names, local_points, group_points, unsupported = self.plan(
                {name: a.forms for name, a in adapters.items()})
            if rank0:
                for line in unsupported:
                    self._problem(f"not measured: {line}", failure=False)
            self._measure(rank0, adapters, local_points, group_points)
        except KeyboardInterrupt:
            self.console.print(f"[yellow]interrupted: {len(self.records)} finished rows kept[/yellow]")
            status = _INTERRUPTED
        finally:
            if self.writer is not None:
                self.writer.close()
        if not rank0:
            return status
        report_ok = self._report()
        verdict = self._verdict(report_ok)  # an interrupted run still ends with the answer of its finished rows
        return status or verdict

    def _measure(self, rank0: bool, adapters: dict, local_points: list[Point], group_points: list[Point]) -> None:
        view = LiveView(self.console, self._title(), len(local_points) + len(group_points)) if rank0 else None
        self.view = view
        try:
            if view is not None:
                view.__enter__()
            if local_points:
                self._local_phase(adapters, local_points)
            if group_points:
                self._group_phase()
        finally:
            if view is not None:
                view.__exit__(None, None, None)
            self.view = None

    def _build_local(self) -> dict:
        """The one-process adapters that could be built (a problem line for each that could not)."""
        built = {}
        for name in ([] if self.torchrun else self._names(_backends.PROCESS)):
            try:
                built[name] = _adapters.build(name, list(self.cfg.devices))
            except (ImportError, AttributeError, NotImplementedError, TypeError, ValueError) as exc:
                self._problem(f"{name}: not run ({type(exc).__name__}: {exc})", failure=self.named)
        return built

    def _local_phase(self, built: dict, points: list[Point]) -> None:
        points = [p for p in points if p.backend in built]

        def on_error(point: Point, exc: BaseException) -> None:
            where = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self._problem(f"{point.backend} {point.case.op}: FAILED at {point.case.size} B ({where}); "
                          f"its remaining sizes are skipped")

        run_points(points, built, self.cfg, self.emit, on_error=on_error, on_start=self._on_start,
                   on_skip=self._on_skip)

    def _on_skip(self, point: Point, exc: BaseException) -> None:
        how = "in graph form" if point.form == _backends.GRAPH else "under cuda-graph"
        self._problem(f"not measured: {point.backend} {point.case.op} {how} from {point.case.size} B "
                      f"(capture failed: {exc})", failure=False)

    def _on_start(self, point: Point) -> None:
        if self.view is not None:
            form = "" if point.form == _backends.PLAIN else f" ({point.form})"
            self.view.describe(f"{point.backend}{form} {point.case.op} {format_size(point.case.size)}")

    def _group_phase(self) -> None:
        if self.view is not None:
            self.view.describe(f"process groups: {self.cfg.nproc} ranks")
        try:
            if self.torchrun:
                emit = self.emit if self.out is not None else (lambda record: None)
                summary = pg.run_here(self.cfg, emit)
            else:
                stream = self.out / _STREAM_FILE
                try:
                    summary = pg.run_spawned(self.cfg, self.emit, stream)
                finally:  # its rows are in records.jsonl by now
                    stream.unlink(missing_ok=True)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            self._problem(f"process-group phase FAILED: {type(exc).__name__}: {exc}")
            return
        if summary:
            for line in summary.get("problems", []):
                self._problem(line, failure=self.named)
            for line in summary.get("skipped", []):
                if "cuda-graph" in line or "graph form" in line:
                    self._problem(f"not measured: {line}", failure=False)

    # ----- the end ------------------------------------------------------------------------------------
    def _report(self) -> bool:
        if not self.records:  # nothing finished: a report would have nothing to say
            self.console.print(f"records: {self.out / 'records.jsonl'} (no rows finished: no report)", highlight=False)
            return True
        try:
            from gpucomm.report import build
        except ImportError as exc:
            self.console.print(f"records: {self.out} (report not built: gpucomm.report unavailable: {exc})")
            return True
        try:
            paths = build([self.out], self.out)
        except Exception as exc:
            self._problem(f"report FAILED: {type(exc).__name__}: {exc}; records are in {self.out}")
            return False
        self.console.print(f"records: {self.out / 'records.jsonl'}", highlight=False)
        self.report_written = "markdown" in paths
        plots = {k: v for k, v in paths.items() if k.startswith("plots/")}
        for name, path in paths.items():
            if name not in plots:
                self.console.print(f"report ({name}): {path}", highlight=False)
        if plots:
            folder = next(iter(plots.values())).parent
            self.console.print(f"plots: {len(plots)} files in {folder}", highlight=False)
        return True

    def _verdict(self, report_ok: bool) -> int:
        wrong = [r for r in self.records if r.wrong > 0]
        status = 0
        if wrong:
            by = collections.Counter(f"{r.backend} {r.op}" for r in wrong)
            self.console.print(f"[bold red]{len(wrong)} row(s) WRONG[/bold red]: "
                               + ", ".join(f"{k} ×{v}" for k, v in by.items()), highlight=False)
            status = 1
        if self.cfg.min_busbw is not None:
            low = min_busbw_failures(self.records, self.cfg.min_busbw)
            for r in low:
                self.console.print(f"[bold red]busbw below --min-busbw {self.cfg.min_busbw:g}[/bold red]: "
                                   f"{r.backend} ({r.form}) {r.op} {r.placement} at {r.size} B: "
                                   f"{r.busbw_gbps:.2f} GB/s",
                                   highlight=False)
            status = status or (1 if low else 0)
        if self.problems or not report_ok:
            status = 1
        self._answer()
        return status

    def _answer(self) -> None:
        """The run's findings in at most five screen lines at the console's width: the last thing it prints
        (the report opens with the same findings in full; the answer names report.md only when it was written)."""
        from gpucomm.report.findings import bench_glance
        from gpucomm.report.terminal import Answer

        more = "report.md" if self.report_written else None
        self.console.print(Answer(lambda width: bench_glance(self.records, width, more=more)))


