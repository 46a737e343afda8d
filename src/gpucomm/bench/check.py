"""Exact correctness checking: inputs from a closed formula, expected outputs computed independently.

As in nccl-tests (``verifiable.h``), inputs are small integers held in the benchmarked dtype, so
every sum, max, min and product is exact in any reduction order and any dtype we offer (bfloat16
included); the check is then bit-exact, except ``avg`` on floating dtypes, which allows 2 ulp.

* :func:`pattern` — participant ``p``'s input of ``numel`` elements: a formula of (p, index, op).
* :func:`expected` — what participant ``q`` must hold afterwards: the collective row's ``expected``
  rule applied to :func:`pattern`, in float64 or int64 (on the output's device, for speed), never by
  running a backend.
* :func:`count_wrong` — elements of an output that differ from the expected ones (``#wrong``).

See ``docs/performance.md`` §5.
"""

from __future__ import annotations

import functools

import torch

from gpucomm import collectives
from gpucomm.collectives import CollectiveName, ReduceOp
from gpucomm.collectives.spec import Data

__all__ = ["SENTINEL", "count_wrong", "expected", "pattern", "release", "value_modulus"]

SENTINEL = -1
"""Fill value of output buffers before an op: no correct output element ever equals it."""

_HASH_A, _HASH_B = 1_000_003, 40_503


def value_modulus(n: int) -> int:
    """Inputs for sum/avg/max/min lie in ``0 … m-1`` so that a sum over ``n`` stays <= 256 (bf16-exact)."""
    return max(2, min(5, 256 // max(n, 1)))


def pattern(p: int, numel: int, n: int, reduce_op: ReduceOp | None, *, dtype: torch.dtype,
            device: torch.device | str = "cpu", start: int = 0) -> torch.Tensor:
    """Participant ``p``'s input: ``numel`` small integers in ``dtype`` on ``device``.

    prod uses 1s and 2s, with a 2 where ``(i + p) % 4 == 0``, so an element's product over n
    participants has at most ceil(n/4) factors of 2; every other op uses a hash of (p, i) mod
    :func:`value_modulus` (participants differ from one another, so a missed copy shows up).
    ``start`` gives elements ``start … start+numel-1`` of the same sequence (one chunk of it).
    """
    i = torch.arange(start, start + numel, dtype=torch.int64, device=device)
    if reduce_op is ReduceOp.PROD:
        values = torch.where((i + p) % 4 == 0, 2, 1)
    else:
        values = (((p * _HASH_A + i) * _HASH_B) >> 8) % value_modulus(n)
    return values.to(dtype)


def _wide(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype.is_floating_point else torch.int64


@functools.lru_cache(maxsize=1)
def _reduce(n: int, numel: int, reduce_op: ReduceOp, dtype: torch.dtype, device: torch.device,
            start: int = 0) -> torch.Tensor:
    """The elementwise reduction of every participant's pattern (cached: all_reduce asks n times)."""
    wide = _wide(dtype)
    acc = pattern(0, numel, n, reduce_op, dtype=wide, device=device, start=start)
    for p in range(1, n):
        x = pattern(p, numel, n, reduce_op, dtype=wide, device=device, start=start)
        if reduce_op in (ReduceOp.SUM, ReduceOp.AVG):
            acc += x
        elif reduce_op is ReduceOp.PROD:
            acc *= x
        elif reduce_op is ReduceOp.MAX:
            acc = torch.maximum(acc, x)
        else:
            acc = torch.minimum(acc, x)
    return acc / n if reduce_op is ReduceOp.AVG else acc


class _Formula(Data):
    """The inputs' formula as a row's expected-result function asks for it (wide dtype, one device)."""

    def __init__(self, n: int, reduce_op: ReduceOp | None, dtype: torch.dtype, device: torch.device) -> None:
        self.n, self.reduce_op, self.dtype, self.device = n, reduce_op, dtype, device

    def input(self, p: int, numel: int, start: int = 0) -> torch.Tensor:
        return pattern(p, numel, self.n, self.reduce_op, dtype=_wide(self.dtype), device=self.device, start=start)

    def reduced(self, numel: int, start: int = 0) -> torch.Tensor:
        return _reduce(self.n, numel, self.reduce_op, self.dtype, self.device, start)

    def cat(self, parts) -> torch.Tensor:
        return torch.cat(list(parts))


def expected(op: CollectiveName, q: int, *, n: int, count: int, dtype: torch.dtype,
             reduce_op: ReduceOp | None, root: int,
             device: torch.device | str = "cpu") -> torch.Tensor | None:
    """What participant ``q``'s output must hold after ``op`` (float64/int64); None = unchecked.

    The rule is the collective's row (``row.expected``); this supplies it with the inputs' formula.
    ``count`` is the row's count (docs/performance.md §1).  ``device`` only says where to compute
    (the output's device is fastest); the values come from the formula alone.
    """
    data = _Formula(n, reduce_op, dtype, torch.device(device))
    return collectives.get(op).expected(q, n, count, root, data)


def release() -> None:
    """Drop the cached reduction (it can be large; the runner calls this after each row's check)."""
    _reduce.cache_clear()


def count_wrong(output: torch.Tensor | None, want: torch.Tensor, reduce_op: ReduceOp | None) -> int:
    """Elements of ``output`` that differ from ``want`` (a missing or mis-shaped output: all of them).

    ``want`` is cast to the output's dtype first, so the comparison is bit-exact; ``avg`` on a
    floating dtype allows 2 ulp of the expected value (nccl-tests' tolerance).  NaN is always wrong.
    """
    if output is None or output.numel() != want.numel():
        return int(want.numel())
    got = output.detach().reshape(-1)
    target = want.to(device=got.device, dtype=got.dtype)
    if reduce_op is ReduceOp.AVG and got.dtype.is_floating_point:
        tol = 2 * torch.finfo(got.dtype).eps * target.double().abs()
        ok = (got.double() - target.double()).abs() <= tol
    else:
        ok = got == target
    return int((~ok).sum())
