"""``launch(fn, nprocs, *args)``: run ``fn`` in ``nprocs`` local processes with a process group ready.

Semantics:

* Workers are started with the multiprocessing **spawn** context (CUDA cannot be forked).  Each runs
  ``fn(*args)`` with the default process group initialised (NCCL when every worker can have a GPU
  of its own, gloo otherwise, or ``backend=``) and ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``LOCAL_WORLD_SIZE`` set; :func:`launch` returns their return values in rank order.
* **Nothing listens beyond loopback.**  A ``TCPStore`` listens on every interface whatever host it
  is given, so the workers rendezvous through a ``FileStore`` in a private (0700) temporary
  directory instead.  ``MASTER_ADDR=127.0.0.1`` is set for anything that reads it, and
  ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME`` are pinned to ``lo``.  NVLink multicast
  variables (``NCCL_NVLS_ENABLE`` …) are inherited as they are, never set.
* **Failures end the launch, all of it.**  When a rank raises, exits without returning (``os._exit``,
  a signal) or does not finish within ``timeout`` seconds (counted from the moment every rank has
  its process group; start-up gets ``max(timeout, 60 s)`` of its own), every other rank is terminated, then
  killed, and :class:`LaunchError` names the failed rank, how it failed and its traceback (for a
  hang: the stack it was stuck in, dumped through ``faulthandler``).  Errors that other ranks
  raised *because* a peer died (connection closed, a collective that failed) are listed, but the
  rank that failed first is the one named.  The process-group timeout is ``max(timeout, 60 s)``
  plus a margin, so a blocked collective fails too, after the launcher has named the rank that
  caused it (and so that a slow start-up does not trip the rendezvous).
* **A rank that returned early is the culprit.**  When the run times out while some ranks are
  blocked in a collective and others have already returned, the ranks that returned are named
  (kind ``"returned"``: they skipped a collective their peers called); the blocked ones are listed
  as caused by it.
* **Nothing outlives the launch.**  Each worker leads its own session (``setsid``), so stopping a
  rank stops its whole process group, grandchildren included, and at the end of every launch any
  process still left in a rank's group is killed.  Workers die with the launching process (Linux
  ``PR_SET_PDEATHSIG``).  A launcher that receives SIGTERM stops its ranks and removes its private
  directory, then dies of the SIGTERM as it would have (its previous handler is restored and the
  signal re-sent), so ``kill`` on a launch leaves nothing behind.
* **How many ranks.**  ``nprocs`` must be >= 1; gloo refuses more than ``4 x os.cpu_count()``
  ranks and NCCL more than the visible GPUs (NCCL cannot put two ranks of one communicator on one
  GPU), because beyond that a launch does not fail, it thrashes: every rank imports torch and
  spins in its collectives.  ``allow_oversubscribe=True`` lifts the gloo limit for those who know
  better (a test of many tiny ranks, say); nothing lifts NCCL's.

``fn`` must be importable by the workers: a module-level function.  Functions defined in a file
that is not on ``sys.path`` (a test file, say) are loaded from that file in the workers.  Return
values travel by value (plain pickle); a CUDA tensor comes back on the same device index, so return
``.cpu()`` tensors to keep CUDA out of the launching process.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import importlib.util
import multiprocessing as mp
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait as _wait
from typing import Any

import gpucomm.dist.ops as _ops
import gpucomm.dist.process_group as _pg
from gpucomm.devices import cuda_device_count
from gpucomm.dist.debug import ENV_VAR as _DEBUG_ENV

__all__ = ["LaunchError", "RankFailure", "check_nprocs", "launch", "max_nprocs"]

_KILL_GRACE_S = 3.0  # SIGTERM, then this long, then SIGKILL
_COLLECT_S = 1.0  # after the first failure, how long to collect the others' before stopping them
_PG_TIMEOUT_MARGIN_S = 5.0
_STARTUP_MIN_S = 60.0  # importing torch in N fresh processes on a loaded machine can take a while
_RANKS_PER_CPU = 4  # gloo: more ranks than this per core is thrashing, not a test


@dataclass(frozen=True, slots=True, kw_only=True)
class RankFailure:
    """How one rank failed."""

    rank: int
    """The failed rank."""
    kind: str
    """"exception", "exit" (ended without a result), "signal", "timeout" or "returned" (returned
    while its peers were still blocked in a collective it never joined)."""
    summary: str
    """One line: ``ValueError: bad input``, ``exited with code 3``, ``killed by SIGKILL``, ..."""
    traceback: str = ""
    """The remote traceback (exception) or the stack it hung in (timeout)."""
    exitcode: int | None = None
    """The process's exit code (negative: killed by that signal), when it had ended."""
    secondary: bool = False
    """True when the failure looks caused by another rank's (a collective that lost its peer)."""
    at: float = field(default=0.0, compare=False)
    """``time.time()`` when it failed (workers' clock for exceptions, the launcher's otherwise)."""


class LaunchError(RuntimeError):
    """A launched worker failed; ``rank``, ``kind`` and ``failures`` say which, how, and what else broke."""

    def __init__(self, failures: list[RankFailure], nprocs: int):
        self.failures = failures
        self.nprocs = nprocs
        first = failures[0]
        self.rank, self.kind, self.summary = first.rank, first.kind, first.summary
        super().__init__(self._message())

    def __reduce__(self):
        return (LaunchError, (self.failures, self.nprocs))

    def _message(self) -> str:
        first = self.failures[0]
        lines = [f"rank {first.rank} of {self.nprocs} failed ({first.kind}): {first.summary}"]
        if first.traceback:
            lines += ["", f"--- rank {first.rank} traceback ---", first.traceback.rstrip()]
        for f in self.failures[1:]:
            lines.append("")
            cause = " (likely caused by the failure above)" if f.secondary else ""
            lines.append(f"rank {f.rank} also failed ({f.kind}){cause}: {f.summary}")
            if f.traceback and not f.secondary:
                lines += [f"--- rank {f.rank} traceback ---", f.traceback.rstrip()]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# the function reference the workers resolve
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _FnRef:
    """A module-level function by module name, qualname and file (file is the fallback import)."""

    module: str
    qualname: str
    file: str | None

    def resolve(self) -> Callable:
        try:
            mod = importlib.import_module(self.module)
        except ImportError:
            if not self.file:
                raise
            mod = _import_file(self.module, self.file)
        else:  # the same name may resolve to another file here (test files share basenames)
            found = getattr(mod, "__file__", None)
            if self.file and found and os.path.realpath(found) != os.path.realpath(self.file):
                mod = _import_file(self.module, self.file)
        obj: Any = mod
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        return obj


def _import_file(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {name!r} from {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _fn_ref(fn: Callable) -> Callable | _FnRef:
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, but got {type(fn).__name__} {fn!r}")
    qualname = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", None)
    if "<locals>" in qualname or "<lambda>" in qualname or module is None:
        raise TypeError(f"fn: expected a module-level function (spawned workers import it by name), but got "
                        f"{qualname or fn!r}; define it at the top level of a module")
    if module == "__main__" or not hasattr(fn, "__code__"):
        _check_picklable(fn, "fn")
        return fn  # multiprocessing re-imports __main__ in the workers
    return _FnRef(module, qualname, getattr(sys.modules.get(module), "__file__", None))


def _check_picklable(obj: object, arg: str) -> None:
    try:
        pickle.dumps(obj)
    except Exception as exc:
        raise TypeError(f"{arg}: expected something the workers can unpickle, but pickling failed: "
                        f"{type(exc).__name__}: {exc}") from None


# ---------------------------------------------------------------------------------------------------
# the worker
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class _WorkerSpec:
    nprocs: int
    backend: str
    pg_timeout_s: float
    tmpdir: str
    debug_check: bool | None


def _worker_env(spec: _WorkerSpec, rank: int) -> dict[str, str]:
    env = {"RANK": str(rank), "WORLD_SIZE": str(spec.nprocs), "LOCAL_RANK": str(rank),
           "LOCAL_WORLD_SIZE": str(spec.nprocs), "MASTER_ADDR": "127.0.0.1",
           "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
    if spec.debug_check is not None:
        env[_DEBUG_ENV] = "1" if spec.debug_check else "0"
    return env


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _own_session() -> None:
    # The rank leads a new session and process group (pgid = its pid), so the launcher can stop
    # everything it started (grandchildren too) with one killpg.
    try:
        os.setsid()
    except OSError:  # already a session leader
        pass


def _worker(rank: int, spec: _WorkerSpec, conn, fn, args: tuple) -> None:
    _own_session()
    _die_with_parent()
    os.environ.update(_worker_env(spec, rank))
    stacks = open(os.path.join(spec.tmpdir, f"stack-{rank}.txt"), "w")  # kept open: the handler writes to it
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    try:
        target = fn.resolve() if isinstance(fn, _FnRef) else fn
        store = _pg.td.FileStore(os.path.join(spec.tmpdir, "store"), spec.nprocs)
        _pg.init(spec.backend, spec.pg_timeout_s, store=store, rank=rank, world_size=spec.nprocs)
        conn.send(("ready", rank))
        # Plain pickle, by value: multiprocessing's pickler would share tensors through file
        # descriptors or CUDA IPC handles that die with this process.
        conn.send(("result", rank, pickle.dumps(target(*args))))
    except BaseException as exc:  # report first, then leave without teardown (a peer may be gone)
        _report(conn, rank, exc)
        os._exit(1)
    _teardown_after_success()
    conn.close()


def _teardown_after_success() -> None:
    # A barrier first: a rank must not free its buffers (NCCL reads peers' memory) while another
    # rank's last collective may still be using them.  A failing peer is the launcher's business.
    try:
        if _pg.is_initialized():
            _ops.barrier()
        _pg.shutdown()
    except Exception:
        os._exit(0)  # the result was delivered; the peer's failure is reported by the launcher


def _report(conn, rank: int, exc: BaseException) -> None:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    message = str(exc).strip().splitlines()
    summary = f"{type(exc).__name__}: {message[0] if message else ''}".rstrip(": ")
    try:
        conn.send(("error", rank, time.time(), summary, text, _looks_secondary(exc)))
        conn.close()
    except Exception:
        pass
    sys.stdout.flush()
    sys.stderr.flush()


def _looks_secondary(exc: BaseException) -> bool:
    """A communication error (peer gone, collective aborted) rather than the user's own failure."""
    dist_error = getattr(_pg.td, "DistError", None)
    if dist_error is not None and isinstance(exc, dist_error):
        return True
    text = str(exc).lower()
    markers = ("connection closed by peer", "connection reset", "gloo", "nccl", "broken pipe",
               "timed out", "socket")
    return type(exc) is RuntimeError and any(m in text for m in markers)


# ---------------------------------------------------------------------------------------------------
# the launcher
# ---------------------------------------------------------------------------------------------------
def max_nprocs(backend: str) -> int:
    """The most ranks :func:`launch` starts on this machine for ``backend`` without ``allow_oversubscribe``."""
    if backend == "nccl":
        return cuda_device_count()
    return _RANKS_PER_CPU * (os.cpu_count() or 1)


def check_nprocs(nprocs: object, backend: str | None = None, *, allow_oversubscribe: bool = False,
                 arg: str = "nprocs") -> int:
    """Refuse a rank count this machine cannot hold (the rule is in this module's docstring).

    CLIs call it at parse time, with ``arg="--nproc"``, so that the refusal is a usage error before
    anything is written.  ``backend=None`` means the one :func:`launch` would choose.

    Raises:
        TypeError: ``nprocs`` is not an int.
        ValueError: ``nprocs`` < 1, or more than :func:`max_nprocs` without ``allow_oversubscribe``.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int):
        raise TypeError(f"{arg}: expected an int >= 1, but got {type(nprocs).__name__} {nprocs!r}")
    if nprocs < 1:
        raise ValueError(f"{arg}: expected an int >= 1, but got {nprocs!r}")
    name = _choose_backend(backend, nprocs)
    limit = max_nprocs(name)
    if name != "nccl" and nprocs > limit and not allow_oversubscribe:
        raise ValueError(f"{arg}: expected at most {limit} ranks on this machine ({_RANKS_PER_CPU} per CPU "
                         f"core, {os.cpu_count()} cores), but got {nprocs}; lower it, or pass "
                         f"allow_oversubscribe=True if you really mean it")
    return nprocs


def _choose_backend(backend: str | None, nprocs: int) -> str:
    if backend is None:
        return _pg.backend_for("cuda" if cuda_device_count() >= nprocs else "cpu")
    name = _pg._check_backend(backend)
    if name == "nccl" and cuda_device_count() < nprocs:
        raise ValueError(f"backend: 'nccl' needs one GPU per process, but nprocs={nprocs} and "
                         f"{cuda_device_count()} CUDA device(s) are visible; lower nprocs or use backend='gloo'")
    return name


def _check_not_nested() -> None:
    env = _pg.read_env()
    if env.world_size > 1:
        raise RuntimeError(f"gpucomm.dist.launch: this process is already rank {env.rank} of a "
                           f"{env.world_size}-process {env.source} job; launch() would start a second job "
                           f"inside it. Call gpucomm.dist.init() and run the function directly instead")


def launch(fn: Callable, nprocs: int, *args: Any, backend: str | None = None,
           timeout: float = _pg.DEFAULT_TIMEOUT, debug_check: bool | None = None,
           allow_oversubscribe: bool = False) -> list:
    """Run ``fn(*args)`` in ``nprocs`` local worker processes, each with the default process group ready.

    Args:
        fn: a module-level function (the workers import it).
        nprocs: the number of workers (= world size), >= 1.
        *args: passed to ``fn`` in every worker (must pickle).
        backend: ``"nccl"``, ``"gloo"``, or None: nccl when there is a GPU for every worker, else gloo.
        timeout: seconds ``fn`` may run, counted once every rank has its process group, before the
            ranks still running are stopped (start-up gets ``max(timeout, 60)`` seconds); the
            process-group timeout is derived from it.
        debug_check: True/False sets ``GPUCOMM_DEBUG_CHECK`` in the workers; None inherits it.
        allow_oversubscribe: start more gloo ranks than ``4 x os.cpu_count()`` (see above).

    Returns:
        ``[fn's return value on rank 0, on rank 1, ...]``.

    Raises:
        LaunchError: a rank raised, exited without returning, was killed, or hung.
        TypeError, ValueError: bad arguments (checked before anything starts).
        RuntimeError: this process is already a worker of a multi-process job.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs: expected an int >= 1, but got {nprocs!r}")
    if not isinstance(allow_oversubscribe, bool):
        raise TypeError(f"allow_oversubscribe: expected a bool, but got {type(allow_oversubscribe).__name__} "
                        f"{allow_oversubscribe!r}")
    seconds = _pg.to_timedelta(timeout).total_seconds()
    ref = _fn_ref(fn)
    _check_picklable(args, "args")
    _check_not_nested()
    name = _choose_backend(backend, nprocs)
    check_nprocs(nprocs, name, allow_oversubscribe=allow_oversubscribe)
    spec = None
    tracker_was_running = _resource_tracker_running()
    with _sigterm_cleans_up():
        try:
            tmpdir = tempfile.mkdtemp(prefix="gpucomm-launch-")  # mkdtemp makes it 0700
            spec = _WorkerSpec(nprocs=nprocs, backend=name,
                               pg_timeout_s=max(seconds, _STARTUP_MIN_S) + _PG_TIMEOUT_MARGIN_S,
                               tmpdir=tmpdir, debug_check=debug_check)
            return _Run(spec, ref, args, seconds).run()
        finally:
            if spec is not None:
                shutil.rmtree(spec.tmpdir, ignore_errors=True)
            if not tracker_was_running:
                _stop_resource_tracker()


class _Terminated(BaseException):
    """SIGTERM arrived during a launch: unwind (stop the ranks, remove the directory), then die of it."""


@contextlib.contextmanager
def _sigterm_cleans_up():
    """While a launch runs, SIGTERM unwinds it; afterwards the previous handler gets the signal.

    Only in the main thread (where Python delivers signals) and only when SIGTERM is not ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN or previous is None:  # None: set outside Python; leave it alone
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, previous)
        os.kill(os.getpid(), signal.SIGTERM)  # the cleanup is done: now die (or run the caller's handler)
        raise KeyboardInterrupt("gpucomm.dist.launch: stopped by SIGTERM") from None  # a handler returned
    finally:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, previous)


def _resource_tracker_running() -> bool:
    from multiprocessing import resource_tracker

    return getattr(resource_tracker._resource_tracker, "_pid", None) is not None


def _stop_resource_tracker() -> None:
    # Starting a spawn-context process starts multiprocessing's resource tracker, a process that
    # otherwise lives as long as this one; stop it when the launch was what started it.
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None:
        try:
            stop()
        except Exception:
            pass


class _Run:
    """One launch: start the workers, watch their pipes and sentinels, stop them all at the end."""

    def __init__(self, spec: _WorkerSpec, fn, args: tuple, timeout_s: float):
        self.spec, self.fn, self.args, self.timeout_s = spec, fn, args, timeout_s
        self.procs: list = []
        self.conns: list = []
        self.ready: set[int] = set()
        self.results: dict[int, Any] = {}
        self.failures: dict[int, RankFailure] = {}
        self.exited: set[int] = set()
        self.returned_at: dict[int, float] = {}

    def run(self) -> list:
        try:
            self._start()
            self._watch()
        finally:
            self._stop()
        if self.failures:
            raise LaunchError(_order(self.failures.values()), self.spec.nprocs)
        return [self.results[r] for r in range(self.spec.nprocs)]

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        for rank in range(self.spec.nprocs):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, args=(rank, self.spec, child, self.fn, self.args),
                            name=f"gpucomm-rank{rank}")
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)

    def _watch(self) -> None:
        n = self.spec.nprocs
        deadline = time.monotonic() + max(self.timeout_s, _STARTUP_MIN_S)  # start-up; then the run's
        clock_started, stop_at = False, None
        while len(self.results) < n:
            now = time.monotonic()
            if stop_at is not None and (now >= stop_at or len(self.exited) == n):
                return
            if stop_at is None and now >= deadline:
                self._timed_out()
                return
            end = deadline if stop_at is None else stop_at
            self._poll(_wait(self._waitables(), timeout=max(0.0, end - now)))
            if not clock_started and len(self.ready) == n:
                clock_started, deadline = True, time.monotonic() + self.timeout_s
            if self.failures and stop_at is None:
                stop_at = time.monotonic() + _COLLECT_S

    def _waitables(self) -> list:
        items = [c for c in self.conns if not c.closed]
        items += [p.sentinel for r, p in enumerate(self.procs) if r not in self.exited]
        return items

    def _poll(self, ready: list) -> None:
        for r, c in enumerate(self.conns):
            if c in ready:
                self._drain(r)
        for r, p in enumerate(self.procs):
            if r not in self.exited and p.sentinel in ready:
                self._drain(r)
                self._exited(r, p)

    def _drain(self, rank: int) -> None:
        c = self.conns[rank]
        try:
            while not c.closed and c.poll():
                self._message(c.recv())
        except (EOFError, OSError):
            c.close()
        except Exception as exc:  # a result that does not unpickle here
            self.failures[rank] = RankFailure(rank=rank, kind="exception", at=time.time(),
                                              summary=f"its return value could not be unpickled: {exc!r}")
            c.close()

    def _message(self, msg: tuple) -> None:
        tag, rank = msg[0], msg[1]
        if tag == "ready":
            self.ready.add(rank)
        elif tag == "result":
            self.results[rank] = pickle.loads(msg[2])
            self.returned_at[rank] = time.time()
        elif tag == "error":
            _, _, at, summary, text, secondary = msg
            self.failures.setdefault(rank, RankFailure(rank=rank, kind="exception", summary=summary,
                                                       traceback=text, secondary=secondary, at=at))

    def _exited(self, rank: int, p) -> None:
        p.join(0.1)
        self.exited.add(rank)
        if rank in self.results or rank in self.failures:
            return
        code = p.exitcode
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
            self.failures[rank] = RankFailure(rank=rank, kind="signal", summary=f"killed by {sig}",
                                              exitcode=code, at=time.time())
        else:
            when = "before returning a result" if rank in self.ready else (
                "before its process group was ready (its stderr says why; a function the workers "
                "cannot import is a common cause)")
            self.failures[rank] = RankFailure(rank=rank, kind="exit", exitcode=code, at=time.time(),
                                              summary=f"exited with code {code} {when}")

    def _timed_out(self) -> None:
        pending = [r for r in range(self.spec.nprocs) if r not in self.results and r not in self.failures]
        now = time.time()
        stacks = _dump_stacks({r: self.procs[r] for r in pending}, self.spec.tmpdir)
        phase = "the run" if len(self.ready) == self.spec.nprocs else "start-up (process-group init)"
        blocked = []
        for r in pending:
            stack = stacks.get(r, "")
            waiting = _waiting_in_collective(stack)
            blocked += [r] if waiting else []
            self.failures[r] = RankFailure(  # a rank stuck in a collective, or with no stack, is not the culprit
                rank=r, kind="timeout", traceback=stack, secondary=waiting or not stack, at=now,
                summary=f"did not finish {phase} within timeout={self.timeout_s:g} s"
                        + (" (blocked in a collective)" if waiting else ""))
        if blocked and len(blocked) == len(pending):
            # Everyone still running waits in a collective that the ranks which returned never
            # joined: those returned ranks are the cause.
            names = ", ".join(map(str, blocked))
            for r in sorted(self.results):
                self.failures[r] = RankFailure(
                    rank=r, kind="returned", at=self.returned_at.get(r, now),
                    summary=f"returned while rank(s) {names} waited for it in a collective it never "
                            f"joined (a collective called on some ranks only)")

    def _stop(self) -> None:
        if not self.failures:  # every rank returned: let them finish tearing down on their own
            end = time.monotonic() + _KILL_GRACE_S
            for p in self.procs:
                p.join(max(0.0, end - time.monotonic()))
        alive = [p for p in self.procs if p.is_alive()]
        for p in alive:
            _signal_group(p, signal.SIGTERM)
        end = time.monotonic() + _KILL_GRACE_S
        for p in alive:
            p.join(max(0.0, end - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(_KILL_GRACE_S)
        for p in self.procs:  # whatever a rank started and left behind goes with it
            _signal_group(p, signal.SIGKILL)
        for c in self.conns:
            c.close()


def _signal_group(p, sig: int) -> None:
    """Send ``sig`` to the process group the worker leads (itself and what it started), and to it."""
    if not p.pid:
        return
    try:
        os.killpg(p.pid, sig)  # pgid == pid: the worker called setsid()
    except (ProcessLookupError, PermissionError):
        pass
    if p.is_alive():
        try:
            os.kill(p.pid, sig)  # a worker that had not reached setsid yet
        except ProcessLookupError:
            pass


def _order(failures) -> list[RankFailure]:
    """The first-failed rank first: own failures before peer-caused ones, then by time."""
    primary_kind = {"exception": 0, "exit": 1, "signal": 1, "returned": 1, "timeout": 2}
    return sorted(failures, key=lambda f: (f.secondary, primary_kind.get(f.kind, 3), f.at, f.rank))


def _dump_stacks(procs: dict, tmpdir: str) -> dict[int, str]:
    for p in procs.values():
        if p.is_alive() and p.pid:
            try:
                os.kill(p.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
    out: dict[int, str] = {}
    end = time.monotonic() + 2.0  # faulthandler writes from the signal handler; give it a moment
    while time.monotonic() < end:
        time.sleep(0.1)
        out = {r: _read(os.path.join(tmpdir, f"stack-{r}.txt")) for r in procs}
        if all(out.values()):
            break
    return out


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _waiting_in_collective(stack: str) -> bool:
    """True when the main thread's innermost frame is inside torch.distributed or gpucomm.dist."""
    blocks = [b for b in stack.split("\n\n") if "File " in b]
    if not blocks:
        return False
    frames = [ln for ln in blocks[-1].splitlines() if ln.strip().startswith("File ")]
    top = frames[0] if frames else ""
    return any(s in top for s in ("torch/distributed", "gpucomm/dist/"))
