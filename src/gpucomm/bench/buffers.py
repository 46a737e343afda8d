"""Buffers of one bench row: which tensors each held participant has, for an op and a placement.

A :class:`Case` is one measured point (op, size, count, dtype, reduction op, root, n, placement);
:func:`plan_case` turns a requested size into it.  :func:`allocate` builds one :class:`BufferSet` —
per held participant an input and an output tensor (``None`` where the op has none, e.g. scatter's
non-root inputs); for in-place placements the output *is* the input or a chunk of it
(``docs/performance.md`` §4).  :func:`fill` writes the check pattern into the inputs and the sentinel
into the outputs, so a set can be reused for the correctness check after timing.
"""

from __future__ import annotations

import dataclasses

import torch

from gpucomm import collectives
from gpucomm.bench.check import SENTINEL, pattern
from gpucomm.collectives import CollectiveName, ReduceOp

__all__ = ["IN_PLACE", "OUT_OF_PLACE", "BufferSet", "Case", "allocate", "fill", "plan_case", "set_nbytes"]

IN_PLACE = "in-place"
OUT_OF_PLACE = "out-of-place"

_N = CollectiveName
_CHUNKED = {_N.ALL_GATHER, _N.REDUCE_SCATTER, _N.SCATTER, _N.GATHER, _N.ALL_TO_ALL}
_ALWAYS_IN_PLACE = {_N.BROADCAST, _N.REDUCE, _N.ALL_REDUCE}


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    """One measured point: everything but the backend and the timing mode."""

    op: CollectiveName
    size: int
    """Bytes actually moved (the requested size rounded down to whole chunks)."""
    count: int
    """Elements in the op's count argument (one chunk for chunked collectives)."""
    dtype: torch.dtype
    reduce_op: ReduceOp | None
    root: int | None
    n: int
    placement: str


def plan_case(op: CollectiveName, size: int, n: int, dtype: torch.dtype, reduce_op: ReduceOp | None,
              placement: str, root: int = 0) -> Case | None:
    """The case for a requested ``size``, rounded down to whole elements (and chunks); None if empty."""
    spec = collectives.get(op)
    elsize = torch.empty((), dtype=dtype).element_size()
    per = elsize * (n if op in _CHUNKED else 1)
    count = size // per
    if count == 0:
        return None
    return Case(op=op, size=count * per, count=count, dtype=dtype,
                reduce_op=reduce_op if spec.reduces else None, root=root if spec.has_root else None,
                n=n, placement=placement)


@dataclasses.dataclass(slots=True)
class BufferSet:
    """One set of buffers: ``inputs[k]`` and ``outputs[k]`` for the k-th held participant."""

    inputs: list[torch.Tensor | None]
    outputs: list[torch.Tensor | None]


def _empty(numel: int, case: Case, device: torch.device) -> torch.Tensor:
    return torch.empty(numel, dtype=case.dtype, device=device)


def _pair(case: Case, p: int, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(input, output) of participant ``p`` on ``device``."""
    op, c, n = case.op, case.count, case.n
    root = case.root if case.root is not None else 0
    if op in _ALWAYS_IN_PLACE and case.placement == IN_PLACE:
        t = _empty(c, case, device)
        return t, t
    if op is _N.BROADCAST:  # out-of-place: a source on the root, a destination everywhere
        return (_empty(c, case, device) if p == root else None), _empty(c, case, device)
    if op in (_N.REDUCE, _N.ALL_REDUCE, _N.SEND_RECV):
        return _empty(c, case, device), _empty(c, case, device)
    if op is _N.ALL_GATHER:
        out = _empty(n * c, case, device)
        inp = out[p * c:(p + 1) * c] if case.placement == IN_PLACE else _empty(c, case, device)
        return inp, out
    if op is _N.REDUCE_SCATTER:
        inp = _empty(n * c, case, device)
        out = inp[p * c:(p + 1) * c] if case.placement == IN_PLACE else _empty(c, case, device)
        return inp, out
    if op is _N.SCATTER:
        return (_empty(n * c, case, device) if p == root else None), _empty(c, case, device)
    if op is _N.GATHER:
        return _empty(c, case, device), (_empty(n * c, case, device) if p == root else None)
    if op is _N.ALL_TO_ALL:
        return _empty(n * c, case, device), _empty(n * c, case, device)
    raise ValueError(f"buffers: no layout for collective {op!r}")


def allocate(case: Case, participants: list[int], devices: list[torch.device]) -> BufferSet:
    """One buffer set for the held ``participants`` (global indices) on their ``devices``."""
    pairs = [_pair(case, p, d) for p, d in zip(participants, devices, strict=True)]
    return BufferSet(inputs=[a for a, _ in pairs], outputs=[b for _, b in pairs])


def fill(case: Case, bufs: BufferSet, participants: list[int]) -> None:
    """Outputs ← sentinel, then inputs ← each participant's check pattern (in place, same tensors)."""
    for out in bufs.outputs:
        if out is not None:
            out.fill_(SENTINEL)
    for p, inp in zip(participants, bufs.inputs, strict=True):
        if inp is not None:
            inp.copy_(pattern(p, inp.numel(), case.n, case.reduce_op, dtype=case.dtype, device=inp.device))


def set_nbytes(bufs: BufferSet) -> int:
    """Bytes held by one buffer set (views of another buffer are not counted twice)."""
    seen: dict[int, int] = {}
    for t in (*bufs.inputs, *bufs.outputs):
        if t is not None:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())
