"""Elementwise reductions of tensors that already sit on one device (the copy path's arithmetic).

Two strategies, chosen by size:

* **stack**: ``torch.stack`` then one reduction along dim 0 — two kernel launches whatever n is,
  which is what small, launch-bound reductions want (torch.cuda.comm.reduce_add launches n-1 adds).
  It needs n × size of scratch memory and moves more bytes: (3n + 1) × size (the stack reads and
  writes every input, the reduction reads the stack and writes the result), so it is used up to
  :data:`STACK_MAX_BYTES`.
* **chain**: ``r = op(x0, x1); r = op(r, x2); ...`` in place — no scratch beyond the result, n - 1
  launches and 3(n - 1) × size bytes, the same kernels and bytes as torch.cuda.comm.reduce_add.

Integer sums keep their dtype (``torch.sum`` would widen int32 to int64).  ``avg`` is defined for
floating-point and complex dtypes only (on integers it would silently truncate, so
:func:`check_op_dtype` rejects it with the fix); it is computed without overflowing half precision:
``torch.mean`` (float32 accumulation) when stacked, each term scaled by 1/n when chained, as NCCL's
average does.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpucomm.collectives import ReduceOp

__all__ = ["ALL_REDUCE_STACK_MAX_BYTES", "STACK_MAX_BYTES", "chain", "check_op_dtype", "combine", "reduce_stacked",
           "stacks"]

STACK_MAX_BYTES = 8 << 20
"""Largest size of one input (bytes) that :func:`combine` stacks for a reduce (and reduce_scatter); above it
the in-place chain is used.  :data:`ALL_REDUCE_STACK_MAX_BYTES` is all_reduce's limit.  The limit is per
input, not n × size: the stack's extra traffic, (3n+1)/(3n-3) of the chain's, shrinks as n grows while
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
faster there too.  (Until 2026-12-04 the limit was 8 MiB of
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


def stacks(collective: str, nbytes: int) -> bool:
    """Whether a reduction whose inputs are ``nbytes`` each stacks (else it chains): ``nbytes`` at most
    all_reduce's limit for "all_reduce", every other reduction's otherwise.

    Read at call time (not bound at import), so tests and experiments can change either constant.
    """
    return nbytes <= (ALL_REDUCE_STACK_MAX_BYTES if collective == "all_reduce" else STACK_MAX_BYTES)


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
