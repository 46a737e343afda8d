"""Elementwise reductions of tensors that already sit on one device (the copy path's arithmetic).

Two strategies, chosen by size:

* **stack**: ``torch.stack`` then one reduction along dim 0 — two kernel launches whatever n is,
  which is what small, launch-bound reductions want (torch.cuda.comm.reduce_add launches n-1 adds).
  It needs n × size of scratch memory and moves more bytes: (3n + 1) × size (the stack reads and
  writes every input, the reduction reads the stack and writes the result), so it is used up to
  :data:`STACK_MAX_BYTES`.
* **chain**: ``r = op(x0, x1); r = op(r, x2); ...`` in place — no scratch beyond the result, n - 1
  launches and 3(n - 1) × size bytes, the same kernels and bytes as torch.cuda.comm.reduce_add.

**Which one.**  Plain calls follow a size rule, the same on every machine (:func:`stacks`): a reduce stacks inputs
of up to :data:`REDUCE_STACK_MAX_BYTES` each, reduce_scatter up to :data:`STACK_MAX_BYTES`, all_reduce up to
:data:`ALL_REDUCE_STACK_MAX_BYTES`.  Between the sizes where one strategy wins on every machine measured (the
stack at 2 MiB per input and below, the chain at 32 MiB and above), which one is faster depends on the machine:
the stack's time there is the device's (it moves a third more bytes), the chain's the host's (n - 1 launches),
and on three H200 machines of 2026-12-04 a prepared reduce of 4 x 8 MiB ran stacked in 0.567, 0.943 and 1.206
of its chained time (the first run's stack-vs-chain table, in overhead-logs_h200x1_2026-12-04/README.txt;
``benchmarks/results/stack-vs-chain-r2_h200x1_2026-12-04.txt``, ``-r4``).  So a **prepared** reduce or
all_reduce on one CUDA device whose inputs fall between those sizes (:func:`times_routes`) times both
strategies when it is prepared, on scratch copies of its tensors (a few rounds of back-to-back calls, as
cuDNN's benchmark mode times its algorithms), and binds the faster (:func:`faster`): the choice costs about
a millisecond once, nothing per call, and is this machine's.  The two strategies add in a different order, so
their results may differ in the last bits (as cuDNN's algorithms may); a prepared call keeps the strategy it
chose, so its results repeat from call to call.  :data:`TIME_ROUTES` = False makes prepared calls follow the
plain rule.

Integer sums keep their dtype (``torch.sum`` would widen int32 to int64).  ``avg`` is defined for
floating-point and complex dtypes only (on integers it would silently truncate, so
:func:`check_op_dtype` rejects it with the fix); it is computed without overflowing half precision:
``torch.mean`` (float32 accumulation) when stacked, each term scaled by 1/n when chained, as NCCL's
average does.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import torch

from gpucomm.collectives import ReduceOp

__all__ = ["ALL_REDUCE_STACK_MAX_BYTES", "REDUCE_STACK_MAX_BYTES", "STACK_MAX_BYTES", "TIMED_MAX_BYTES",
           "TIMED_MIN_BYTES", "TIME_ROUTES", "bind_chain", "chain", "check_op_dtype", "combine", "faster",
           "reduce_stacked", "stacks", "times_routes", "wall_timer"]

STACK_MAX_BYTES = 8 << 20
"""Largest size of one input (bytes) that :func:`combine` stacks for a reduce_scatter; above it the in-place
chain is used.  :data:`REDUCE_STACK_MAX_BYTES` is reduce's limit, :data:`ALL_REDUCE_STACK_MAX_BYTES`
all_reduce's.  The limit is per input, not n × size: the stack's extra traffic, (3n+1)/(3n-3) of the chain's, shrinks as n grows while
the launches it saves (n - 3) grow, so a larger n never favours the chain more.

Below it a call is bound by host time (launches), where two kernels beat n - 1; above it by device
bandwidth, where the stack's extra bytes cost more than the launches saved.  On one H200, 4 x cuda:0,
``benchmarks/stack_vs_chain.py`` (benchmarks/results/overhead-logs_h200x1_2026-12-04/README.txt, whose
stack-vs-chain table is the run's stdout) measured, per call, stacked against chained: reduce 2 MiB each
40.51 against 48.72 us plain, 28.91 against 57.17 us prepared; 8 MiB each 40.96 against 48.06 plain,
32.75 against 57.79 prepared; 32 MiB each 119.06 against 77.19 plain, 118.36 against 77.06 prepared.
So inputs up to and including 8 MiB stack, larger ones chain.  8 MiB is near the crossover: on another
machine (stack-vs-chain-r2_h200x1_2026-12-04.txt, a faster host) the plain reduce at 8 MiB each ran 33.06
stacked against 30.72 us chained, the prepared one 32.82 against 34.79; 2 MiB stacked and 32 MiB chained
faster there too; on a third (stack-vs-chain-r4) 32.80 against 23.40 plain, which moved reduce's own limit to
4 MiB (:data:`REDUCE_STACK_MAX_BYTES`).  reduce_scatter keeps 8 MiB: its route above the limit is not a bound
chain (a reduction, then n chunk copies), which ran at 0.95 of torch's at 32 MiB (comm-vs-torch-r4), while
its stacked route ran 1.31 at 8 MiB.  (Until 2026-12-04 the limit was 8 MiB of
n × size, so 8 MiB inputs chained: the prepared reduce there ran 56.61 us, 0.94x of torch's reduce_add,
communicator-overhead_h200x1_2026-12-04.txt.)
"""

ALL_REDUCE_STACK_MAX_BYTES = 8 << 20
"""all_reduce's stacking limit (size of one input, bytes): a reduce followed by n - 1 copies to the others.

The stack moves (3n + 1) × size bytes against the chain's 3(n - 1) × size (the n - 1 copies, 2(n - 1) ×
size, are the same for both), 4 × size more at any n, for n - 3 fewer launches (one at n = 4).  Measured
in the same run as :data:`STACK_MAX_BYTES` (4 x cuda:0, stacked against chained per call): 2 MiB each
85.60 against 88.77 us plain, 66.23 against 96.43 us prepared; 8 MiB each 87.37 against 89.33 plain,
65.61 against 97.58 prepared; 32 MiB each 176.63 against 134.74 plain, 174.92 against 134.37 prepared.
"""


REDUCE_STACK_MAX_BYTES = 4 << 20
"""reduce's stacking limit (size of one input, bytes) for plain calls: 4 MiB, where :data:`STACK_MAX_BYTES` is
8 MiB, because at 8 MiB per input the stack lost to torch's own reduce_add (the chain's kernels) on four of the
six H200 machines of 2026-12-04 — LocalCommunicator plain reduce 0.787-0.926 of torch's on
communicator-overhead-r2/-r4/-r5/-r6 (1.135 and 1.303 on the first and r3) — while the chain ran ahead of torch's
at 8 MiB on every machine that timed it (plain 23.40 against 25.88 us, 30.72 against 35.46 and 48.06 against
54.41: stack-vs-chain-r4, -r2 and the first run, overhead-logs_h200x1_2026-12-04).  At 2 MiB per input the
stack ran ahead of the chain everywhere (plain 0.785-0.831 of its time).  Prepared calls time both strategies
in between (:func:`times_routes`)."""


def stacks(collective: str, nbytes: int) -> bool:
    """Whether a plain reduction whose inputs are ``nbytes`` each stacks (else it chains): ``nbytes`` at most
    the limit of ``collective`` ("reduce", "all_reduce"; any other: reduce_scatter's :data:`STACK_MAX_BYTES`).

    Read at call time (not bound at import), so tests and experiments can change the constants.
    """
    if collective == "all_reduce":
        return nbytes <= ALL_REDUCE_STACK_MAX_BYTES
    return nbytes <= (REDUCE_STACK_MAX_BYTES if collective == "reduce" else STACK_MAX_BYTES)


TIME_ROUTES = True
"""Whether a prepared reduce or all_reduce in the timed band (:func:`times_routes`) times both strategies and
keeps the faster; False: it follows the plain calls' rule (:func:`stacks`)."""
TIMED_MIN_BYTES = 2 << 20
TIMED_MAX_BYTES = 32 << 20
"""The timed band, exclusive at both ends (size of one input, bytes): at 2 MiB the stack ran ahead of the
chain on every H200 machine measured (prepared 0.49-0.53 of its time), at 32 MiB the chain ahead of the stack
(prepared 1.54), in between it depends on the machine (module docstring)."""


def times_routes(first: torch.Tensor) -> bool:
    """Whether a prepared reduction of inputs like ``first`` on one device times both strategies: a CUDA tensor
    of more than :data:`TIMED_MIN_BYTES` and less than :data:`TIMED_MAX_BYTES` (host-bound CPU reductions
    follow the rule), while :data:`TIME_ROUTES` is on."""
    return TIME_ROUTES and first.is_cuda and TIMED_MIN_BYTES < first.nbytes < TIMED_MAX_BYTES


Timer = Callable[[Callable[[], object], int], float]
"""``timer(run, calls)``: seconds that ``calls`` back-to-back calls of ``run`` take."""


def wall_timer(device: torch.device) -> Timer:
    """The timer of :func:`faster` on ``device``: host clock between two synchronisations of the device (none
    in between), so a call's time is its host issue time or its device time, whichever bounds it — what a
    caller's loop of calls sees (``benchmarks/communicator_overhead.py`` times calls the same way)."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timer(run: Callable[[], object], calls: int) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            run()
        sync()
        return time.perf_counter() - t0

    return timer


def faster(candidates: Mapping[str, Callable[[], object]], timer: Timer, *, rounds: int = 5, calls: int = 4,
           warmup: int = 2) -> str:
    """The name of the fastest of ``candidates`` (runs of one collective on the same tensors): each is called
    ``warmup`` times, then ``rounds`` rounds time ``calls`` back-to-back calls of each, the order alternating from
    round to round; the smallest median wins, the first listed on a tie (list the plain rule's choice first)."""
    names = list(candidates)
    for name in names:
        for _ in range(warmup):
            candidates[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            times[name].append(timer(candidates[name], calls))
    medians = {name: statistics.median(v) for name, v in times.items()}
    return min(names, key=lambda name: (medians[name], names.index(name)))


def check_op_dtype(op: ReduceOp, dtype: torch.dtype, fn: str) -> None:
    """Reject ops that are undefined for ``dtype`` (avg on integers or bool)."""
    if op is ReduceOp.AVG and not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"{fn}: op='avg' needs a floating-point dtype, but the tensors are {dtype}; "
                         f"an integer average would truncate. Cast to float first (t.float()), or use "
                         f"op='sum' and divide yourself")
    if dtype.is_complex and op in (ReduceOp.MAX, ReduceOp.MIN):
        raise ValueError(f"{fn}: op={op.value!r} is undefined for complex tensors ({dtype}); "
                         f"use 'sum', 'avg' or 'prod'")


def reduce_stacked(stacked: torch.Tensor, op: ReduceOp, out: torch.Tensor | None = None) -> torch.Tensor:
    """Reduce along dim 0 of ``stacked`` (shape ``[n, *shape]``), into ``out`` when given."""
    dtype = stacked.dtype
    if op is ReduceOp.AVG:  # mean accumulates in float32 and divides before rounding: no fp16 overflow
        return torch.mean(stacked, 0, out=out) if out is not None else torch.mean(stacked, 0)
    if op is ReduceOp.SUM:
        return torch.sum(stacked, 0, dtype=dtype, out=out) if out is not None else torch.sum(stacked, 0, dtype=dtype)
    if op is ReduceOp.PROD:
        return torch.prod(stacked, 0, dtype=dtype, out=out) if out is not None else torch.prod(stacked, 0,
                                                                                              dtype=dtype)
    fn = torch.amax if op is ReduceOp.MAX else torch.amin
    return fn(stacked, 0, out=out) if out is not None else fn(stacked, 0)


_INPLACE = {ReduceOp.SUM: torch.Tensor.add_, ReduceOp.PROD: torch.Tensor.mul_}
_BINARY = {ReduceOp.SUM: torch.add, ReduceOp.PROD: torch.mul,
           ReduceOp.MAX: torch.maximum, ReduceOp.MIN: torch.minimum}


def combine(tensors: Sequence[torch.Tensor], op: ReduceOp, out: torch.Tensor | None = None, *,
            collective: str = "reduce") -> torch.Tensor:
    """The elementwise reduction of same-shape, same-dtype tensors on one device.

    ``collective`` picks the stacking limit (:func:`stacks`): "all_reduce" stacks inputs up to
    :data:`ALL_REDUCE_STACK_MAX_BYTES` each, anything else up to :data:`STACK_MAX_BYTES`.

    ``out`` (on that device) receives the result; it may be one of ``tensors`` (in-place reduce) but
    must not otherwise overlap them (callers guarantee it).  With one tensor and no ``out`` the
    tensor itself is returned.
    """
    n = len(tensors)
    first = tensors[0]
    if n == 1:
        if out is None:
            return first
        return out.copy_(first) if out.data_ptr() != first.data_ptr() else out
    if first.layout != torch.strided:
        return _combine_sparse(tensors, op, out)
    if stacks(collective, first.numel() * first.element_size()):
        return reduce_stacked(torch.stack(list(tensors)), op, out)  # the stack snapshots the inputs
    if out is not None and any(_partly_aliased(out, t) for t in tensors):
        return out.copy_(chain(tensors, op, None))
    return chain(tensors, op, out)


def _is_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.stride() == b.stride() and a.device == b.device


def _partly_aliased(out: torch.Tensor, t: torch.Tensor) -> bool:
    from gpucomm.comm._copy import overlaps
    return overlaps(out, t) and not _is_view(out, t)


def chain(tensors: Sequence[torch.Tensor], op: ReduceOp, out: torch.Tensor | None) -> torch.Tensor:
    """The in-place chain ``r = op(x0, x1); r = op(r, x2); ...`` into ``out`` (which may be one of ``tensors``,
    the reduction then runs in place on it, but must share no memory with another: callers guarantee it)."""
    rest = list(tensors)
    k = -1 if out is None else next((i for i, t in enumerate(rest) if t is out or _is_view(out, t)), -1)
    if op is ReduceOp.AVG:
        return _chain_avg(rest, out, k)
    if k >= 0:
        result = rest.pop(k)  # in place: out *is* one of the inputs
    else:
        binary = _BINARY[op]
        a, b = rest.pop(0), rest.pop(0)
        result = binary(a, b, out=out) if out is not None else binary(a, b)
    for t in rest:
        if op in _INPLACE:
            _INPLACE[op](result, t)
        else:
            _BINARY[op](result, t, out=result)
    return result


def bind_chain(tensors: Sequence[torch.Tensor], op: ReduceOp, out: torch.Tensor) -> Callable[[], object] | None:
    """:func:`chain` into ``out`` as a prepared run: the same kernels, with what :func:`chain` asks on every call
    (which input ``out`` is, the op's kernels) decided once.  ``out`` must be one of ``tensors`` (or a view
    equal to one) or share no memory with any; None when it partly overlaps one (the caller binds the general
    route, which reduces into a temporary first), or for ``avg`` (its chain scales each term as it adds)."""
    from gpucomm.comm._copy import overlaps

    if op is ReduceOp.AVG:
        return None
    rest = list(tensors)
    k = next((i for i, t in enumerate(rest) if t is out or _is_view(out, t)), -1)
    if k < 0 and any(overlaps(out, t) for t in rest):
        return None
    inplace = _INPLACE.get(op)
    binary = _BINARY[op]
    if k >= 0:
        result = rest.pop(k)
        head = None
    else:
        result = out
        head = functools.partial(binary, rest.pop(0), rest.pop(0), out=out)
    steps = [functools.partial(inplace, result, t) if inplace is not None else
             functools.partial(binary, result, t, out=result) for t in rest]
    if head is not None:
        steps.insert(0, head)
    return functools.partial(_run_steps, steps)


def _run_steps(steps: list[Callable[[], object]]) -> None:
    for step in steps:
        step()


def _chain_avg(rest: list[torch.Tensor], out: torch.Tensor | None, k: int) -> torch.Tensor:
    # Each term is scaled by 1/n as it is added (partial sums cannot overflow), and half-precision
    # inputs accumulate in float32 (70 float16 terms of 1000 would otherwise drift by ~0.6%).
    scale = 1.0 / len(rest)
    j = max(k, 0)
    first = rest[j]
    acc_dtype = torch.float32 if first.dtype in (torch.float16, torch.bfloat16) else first.dtype
    acc = first.to(acc_dtype, copy=True).mul_(scale)
    for i, t in enumerate(rest):
        if i != j:
            acc.add_(t, alpha=scale)
    if k >= 0:
        return first.copy_(acc)
    if out is not None:
        return out.copy_(acc)
    return acc if acc.dtype == first.dtype else acc.to(first.dtype)


def _combine_sparse(tensors: Sequence[torch.Tensor], op: ReduceOp, out: torch.Tensor | None) -> torch.Tensor:
    if op is not ReduceOp.SUM and op is not ReduceOp.AVG:
        raise ValueError(f"op={op.value!r} is not supported on sparse tensors; use 'sum' or 'avg', or "
                         f"convert with .to_dense()")
    result = tensors[0] + tensors[1]
    for t in tensors[2:]:
        result = result + t
    if op is ReduceOp.AVG:
        result = result / len(tensors)
    if out is not None:
        out.copy_(result)
        return out
    return result
