"""Buffers of one bench row: which tensors each held participant has, for an op and a placement.

A :class:`Case` is one measured point (op, size, count, dtype, reduction op, root, n, placement);
:func:`plan_case` turns a requested size into it with the row's :meth:`~gpucomm.collectives.spec.
Collective.round_size`.  :func:`allocate` builds one :class:`BufferSet` from the row's ``buffers`` —
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
from gpucomm.collectives.spec import IN_PLACE, OUT_OF_PLACE

__all__ = ["IN_PLACE", "OUT_OF_PLACE", "BufferSet", "Case", "allocate", "fill", "plan_case", "planned_nbytes",
           "set_nbytes"]


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
    count, moved = spec.round_size(size, n, torch.empty((), dtype=dtype).element_size())
    if count == 0:
        return None
    return Case(op=spec.name, size=moved, count=count, dtype=dtype,
                reduce_op=reduce_op if spec.reduces else None, root=root if spec.has_root else None,
                n=n, placement=placement)


@dataclasses.dataclass(slots=True)
class BufferSet:
    """One set of buffers: ``inputs[k]`` and ``outputs[k]`` for the k-th held participant."""

    inputs: list[torch.Tensor | None]
    outputs: list[torch.Tensor | None]


def allocate(case: Case, participants: list[int], devices: list[torch.device]) -> BufferSet:
    """One buffer set for the held ``participants`` (global indices) on their ``devices``."""
    buffers = collectives.get(case.op).buffers
    root = case.root if case.root is not None else 0
    pairs = []
    for p, device in zip(participants, devices, strict=True):
        def empty(numel: int, device: torch.device = device) -> torch.Tensor:
            return torch.empty(numel, dtype=case.dtype, device=device)

        pairs.append(buffers(p, case.n, case.count, root, case.placement, empty))
    return BufferSet(inputs=[a for a, _ in pairs], outputs=[b for _, b in pairs])


def fill(case: Case, bufs: BufferSet, participants: list[int]) -> None:
    """Outputs ← sentinel, then inputs ← each participant's check pattern (in place, same tensors)."""
    for out in bufs.outputs:
        if out is not None:
            out.fill_(SENTINEL)
    for p, inp in zip(participants, bufs.inputs, strict=True):
        if inp is not None:
            inp.copy_(pattern(p, inp.numel(), case.n, case.reduce_op, dtype=case.dtype, device=inp.device))


def planned_nbytes(case: Case, participants: list[int]) -> int:
    """Bytes one buffer set of ``case`` will hold, from the row's declared buffer sizes (before allocating).

    In place, a participant's output lives inside its input (or the reverse), so the larger one counts.
    """
    row = collectives.get(case.op)
    root = case.root if case.root is not None else 0
    total = 0
    for p in participants:
        inp = row.input_nbytes(case.size, case.n, is_root=p == root)
        out = row.output_nbytes(case.size, case.n, is_root=p == root)
        total += max(inp, out) if case.placement == IN_PLACE else inp + out
    return total


def set_nbytes(bufs: BufferSet) -> int:
    """Bytes held by one buffer set (views of another buffer are not counted twice)."""
    seen: dict[int, int] = {}
    for t in (*bufs.inputs, *bufs.outputs):
        if t is not None:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())
