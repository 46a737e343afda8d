"""torch.cuda.comm's C++ loops (``torch._C._broadcast_out``, ``_scatter_out``) as CPU stand-ins, for the tests.

A CPU build of torch has no such loops, so gpucomm's route through them (``gpucomm.comm._kernels``) would never
run on the CI machine.  These stand-ins check what the real loops check, in the same order and with the same
exception types, before their first copy (torch/csrc/cuda/comm.cpp: ``broadcast_out``, ``scatter_out``), and
then copy as they do — except that CPU tensors are accepted where the real loops require CUDA ones (every
other refusal is kept, so a call the stand-in takes is one the real loop would take on a GPU).  Each call is
recorded, so a test can tell whether the loop ran.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from gpucomm.comm import _kernels


def _tensors(outs, what: str) -> list[torch.Tensor]:
    if not all(isinstance(o, torch.Tensor) for o in outs):  # pybind's conversion of std::vector<at::Tensor>
        raise TypeError(f"{what}(): incompatible function arguments")
    return list(outs)


def broadcast_out(tensor: torch.Tensor, out) -> list[torch.Tensor]:
    outs = _tensors(out, "_broadcast_out")
    for i, o in enumerate(outs):
        if o.shape != tensor.shape:  # a nested tensor's shape raises RuntimeError, as sizes() does in C++
            raise RuntimeError(f"Expected all output tensors to have same shape as the source tensor "
                               f"{list(tensor.shape)}, but output tensor at index {i} has shape {list(o.shape)}")
    for o in outs:
        o.copy_(tensor, non_blocking=True)
    return list(outs)  # pybind returns a new list


def scatter_out(tensor: torch.Tensor, out, dim: int, streams) -> list[torch.Tensor]:
    outs = _tensors(out, "_scatter_out")
    if not outs:
        raise RuntimeError("Expected at least one output tensor to scatter to")
    nd = max(tensor.dim(), 1)  # at::maybe_wrap_dim(dim, tensor): a 0-dim tensor wraps as 1-dim
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    dim %= nd
    total, sizes = 0, []
    for i, o in enumerate(outs):
        same_ndim = o.dim() == tensor.dim()
        want = list(o.shape)
        if same_ndim:
            total += o.shape[dim]
            sizes.append(o.shape[dim])
            want[dim] = tensor.shape[dim]
        if not (same_ndim and want == list(tensor.shape)):
            raise RuntimeError(f"Output tensor at index {i} has incorrect shape: {list(o.shape)}")
    if total != tensor.shape[dim]:
        raise RuntimeError(f"Total size for output tensors along scatter dim {dim} does not match the source "
                           f"tensor size at dim {dim}. Expected {tensor.shape[dim]}, but got total size {total}")
    for o, chunk in zip(outs, tensor.split_with_sizes(sizes, dim), strict=True):
        o.copy_(chunk, non_blocking=True)
    return list(outs)


@contextlib.contextmanager
def on_cpu() -> Iterator[list[str]]:
    """Install the stand-ins as gpucomm's torch loops; yields the list of loops called ("broadcast", "scatter")."""
    calls: list[str] = []

    def recorded(name, fn):
        def loop(*args):
            result = fn(*args)
            calls.append(name)  # only a call that passed the loop's checks (and copied) is recorded
            return result
        return loop

    saved = _kernels.BROADCAST_OUT, _kernels.SCATTER_OUT
    _kernels.BROADCAST_OUT = recorded("broadcast", broadcast_out)
    _kernels.SCATTER_OUT = recorded("scatter", scatter_out)
    try:
        yield calls
    finally:
        _kernels.BROADCAST_OUT, _kernels.SCATTER_OUT = saved
