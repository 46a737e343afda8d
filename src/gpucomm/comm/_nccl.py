"""The NCCL path: ``torch.cuda.nccl`` when every tensor is dense, contiguous, of one dtype, on distinct GPUs.

torch builds one NCCL communicator per ordered device list (``ncclCommInitAll``) and caches it, so
we pass no ``comms``: the first call on a new device list pays the set-up, later calls reuse it.
Every call is enqueued on each device's current stream; nothing here synchronises the host.

:func:`usable` is the single gate; when it says no, callers take the copy path (``_copy``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from gpucomm.collectives import ReduceOp

__all__ = ["all_gather", "all_reduce", "available", "broadcast", "reduce", "reduce_scatter", "usable"]

# ncclRedOp_t values (nccl.h): ncclSum=0, ncclProd=1, ncclMax=2, ncclMin=3, ncclAvg=4 (NCCL >= 2.10).
_NCCL_OP = {ReduceOp.SUM: 0, ReduceOp.PROD: 1, ReduceOp.MAX: 2, ReduceOp.MIN: 3, ReduceOp.AVG: 4}

# dtypes torch maps to an NCCL type (torch/csrc/cuda/nccl.cpp to_nccl_data_type).  bool travels as
# uint8: fine for moving bytes, wrong for sum (1+1=2 is not a bool), so reductions refuse it.
_MOVE_DTYPES = frozenset({torch.float32, torch.float16, torch.float64, torch.bfloat16, torch.int64,
                          torch.int32, torch.int8, torch.uint8, torch.bool})
_REDUCE_DTYPES = _MOVE_DTYPES - {torch.bool}


@functools.cache
def available() -> bool:
    """True when torch was built with NCCL and a GPU is visible (probed once)."""
    from gpucomm.devices import cuda_available
    return cuda_available() and hasattr(torch._C, "_nccl_all_reduce")


@functools.cache
def _has_avg() -> bool:
    try:
        return tuple(torch.cuda.nccl.version()[:2]) >= (2, 10)
    except Exception:
        return False


def usable(tensors: Sequence[torch.Tensor], *, distinct: Sequence[torch.Tensor] | None = None,
           op: ReduceOp | None = None) -> bool:
    """Whether NCCL can run on ``tensors``.

    Args:
        tensors: every tensor the call reads or writes; all must be dense, contiguous CUDA tensors of
            one NCCL-supported dtype.
        distinct: the per-participant tensors that must sit on pairwise distinct devices
            (default: ``tensors``).
        op: the reduction, for reducing collectives (bool is refused; avg needs NCCL >= 2.10).
    """
    if not available() or len(tensors) < 2:
        return False
    group = tensors if distinct is None else distinct
    if len({t.get_device() for t in group}) != len(group):  # first: it rules out repeated device lists cheaply
        return False
    dtype = tensors[0].dtype
    allowed = _MOVE_DTYPES if op is None else _REDUCE_DTYPES
    if dtype not in allowed or (op is ReduceOp.AVG and not _has_avg()):
        return False
    for t in tensors:
        if not t.is_cuda or t.layout != torch.strided or t.dtype != dtype or not t.is_contiguous():
            return False
    return len(group) >= 2


def broadcast(tensors: list[torch.Tensor], root: int = 0) -> None:
    """Copy ``tensors[root]`` into every other tensor, in place."""
    torch.cuda.nccl.broadcast(tensors, root=root)


def reduce(inputs: list[torch.Tensor], output: torch.Tensor, root: int, op: ReduceOp) -> None:
    """Reduce ``inputs`` into ``output`` (on ``inputs[root]``'s device; may be ``inputs[root]``)."""
    torch.cuda.nccl.reduce(inputs, output=output, root=root, op=_NCCL_OP[op])


def all_reduce(inputs: list[torch.Tensor], outputs: list[torch.Tensor], op: ReduceOp) -> None:
    """outputs[i] = reduction of all inputs (outputs may be the inputs)."""
    torch.cuda.nccl.all_reduce(inputs, outputs, op=_NCCL_OP[op])


def all_gather(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
    """outputs[i] = the flat concatenation of all inputs (dim-0 concatenation for contiguous tensors)."""
    torch.cuda.nccl.all_gather(inputs, outputs)


def reduce_scatter(inputs: list[torch.Tensor], outputs: list[torch.Tensor], op: ReduceOp) -> None:
    """outputs[i] = flat chunk i of the reduction of all inputs."""
    torch.cuda.nccl.reduce_scatter(inputs, outputs, op=_NCCL_OP[op])
