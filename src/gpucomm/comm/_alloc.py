"""Output allocation: where a host result meets a GPU and is big enough, it is pinned, so its copy can be asynchronous."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gpucomm.comm._host import DIRECT_MAX_BYTES, pinned_empty

__all__ = ["empty_like_on", "empty_on", "replicate", "suggest_memory_format"]


def empty_on(shape: Sequence[int], dtype: torch.dtype, device: torch.device, *, pinned: bool,
             memory_format: torch.memory_format = torch.contiguous_format) -> torch.Tensor:
    """A new tensor on ``device``; pinned host memory when ``device`` is the CPU and ``pinned`` is set.

    ``pinned`` means "a GPU takes part in this call": then the CUDA runtime is initialised anyway and
    a pinned host buffer lets the device-to-host copy run asynchronously, in parallel with others.
    Buffers of at most ``_host.DIRECT_MAX_BYTES`` stay pageable: their copies are latency-bound and
    run as torch runs them (see :mod:`gpucomm.comm._host`).
    """
    if pinned and device.type == "cpu" and math.prod(shape) * dtype.itemsize > DIRECT_MAX_BYTES:
        return pinned_empty(shape, dtype, memory_format)
    return torch.empty(tuple(shape), dtype=dtype, device=device, memory_format=memory_format)


def empty_like_on(t: torch.Tensor, device: torch.device, *, pinned: bool) -> torch.Tensor:
    """Like ``torch.empty_like(t, device=device)`` (strides preserved when dense), pinned as above."""
    if pinned and device.type == "cpu" and t.nbytes > DIRECT_MAX_BYTES:
        if t.is_contiguous():
            return pinned_empty(t.shape, t.dtype)
        return torch.empty_like(t, device="cpu", pin_memory=True)
    return torch.empty_like(t, device=device)


def suggest_memory_format(tensors: Sequence[torch.Tensor]) -> torch.memory_format:
    """channels_last(_3d) when every tensor is laid out so (torch.cuda.comm.gather's rule), else contiguous."""
    first = tensors[0]
    for fmt, ndim in ((torch.channels_last, 4), (torch.channels_last_3d, 5)):
        if first.dim() == ndim and all(t.dim() == ndim and not t.is_contiguous()
                                       and t.is_contiguous(memory_format=fmt) for t in tensors):
            return fmt
    return torch.contiguous_format


def replicate(t: torch.Tensor, k: int) -> list[torch.Tensor]:
    """``k`` distinct copies of ``t`` on its own device, made by one kernel (an expanded clone).

    The copies are views of one ``[k, *shape]`` buffer: separate memory, one allocation, one
    launch, instead of k clones.
    """
    if k == 0:
        return []
    return list(t.unsqueeze(0).expand(k, *t.shape).clone(memory_format=torch.contiguous_format).unbind(0))
