"""``scatter`` (split one tensor over devices) and ``gather`` (concatenate tensors onto one device)."""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import torch

from gpucomm._validate import check_tensor, describe, fail_type, fail_value
from gpucomm.comm import _copy, _host, _kernels
from gpucomm.comm._alloc import empty_like_on, empty_on, suggest_memory_format
from gpucomm.comm._checks import (
    SHAPE_OF,
    TORCH_REFUSALS,
    cat_shape,
    check_cat_shapes,
    check_dim,
    check_disjoint,
    check_int,
    check_streams,
    check_tensors,
    destination_arg,
    devices_arg,
    one_device,
)
from gpucomm.comm._prepare import prepared_form

__all__ = ["CAT_MAX_BYTES", "bind_gather", "bind_scatter", "cat_fits", "check_gather", "check_scatter_out", "default_destination", "gather", "gather_output", "scatter",
           "scatter_into", "scatter_outputs"]

_MINUS_ONE_WARNING = ('Using -1 to represent CPU tensor is deprecated. Please use a device object or string '
                      'instead, e.g., "cpu".')


def _dense(t: torch.Tensor, arg: str) -> None:
    if t.layout != torch.strided:
        raise fail_value(arg, "a dense (strided) tensor", describe(t), "convert it with .to_dense()")


def scatter(tensor: torch.Tensor, devices: Any = None, chunk_sizes: Any = None, dim: int = 0,
            streams: Any = None, *, out: Any = None) -> tuple[torch.Tensor, ...]:
    """Split ``tensor`` along ``dim`` and put chunk i on device i (drop-in for ``torch.cuda.comm.scatter``).

    Semantics:
        * Exactly one of ``devices`` and ``out`` is given.
        * With ``devices`` and no ``chunk_sizes`` the split is ``tensor.chunk(len(devices), dim)``,
          which may give **fewer chunks than devices** (2 rows over 3 devices give 2 chunks); there
          is one output per chunk, and trailing devices get nothing.  ``chunk_sizes`` must have one
          non-negative size per device and sum to ``tensor.size(dim)``.
        * A chunk that already sits on its device is returned as a view of ``tensor`` (no copy).
        * With ``out`` the sizes along ``dim`` come from the ``out`` tensors (which must match
          ``tensor`` in every other dim and sum to its size along ``dim``); ``devices`` and
          ``chunk_sizes`` must then be omitted.
        * ``streams`` (one ``torch.cuda.Stream`` or None per device) makes the copy to device i run on
          ``streams[i]``; the caller then synchronises with that stream, as with torch.  Without
          streams every result is ready on its device's current stream.
        * A CPU source is staged through pinned memory (pageable sources in pipelined pieces) and
          copied to every device at once.

    Returns:
        ``tuple[Tensor, ...]``: the chunks, in device order (or the ``out`` tensors).
    """
    if (devices is None and chunk_sizes is None and streams is None and type(dim) is int
            and (type(out) is list or type(out) is tuple)):
        done = _kernels.scatter_out(tensor, out, dim)  # torch.cuda.comm's C++ loop, if it may take the call
        if done is not None:
            return tuple(done)
    check_tensor(tensor, "tensor")
    _dense(tensor, "tensor")
    if out is not None:
        return _scatter_out(tensor, out, devices, chunk_sizes, dim, streams)
    if devices is None:
        raise TypeError("scatter: expected exactly one of 'devices' and 'out', but got neither; pass "
                        "devices=[...] to have new tensors allocated, or out=[...] to supply them")
    devs = devices_arg(devices)
    d = check_dim(dim, tensor.dim(), what="tensor")
    sizes = None if chunk_sizes is None else _chunk_sizes(chunk_sizes, len(devs), tensor.shape[d], d)
    strs = check_streams(streams, devs)
    if strs is None and _TORCH_SCATTER is not None and tensor.is_cpu and _CPU not in devs \
            and _direct_from_host(tensor, d, sizes, len(devs)):
        # Host to GPUs, latency-bound or from pinned memory: torch's own loop, in C++ (each chunk
        # .to(device, non_blocking=True)), with no Python round trip per chunk.
        return tuple(_TORCH_SCATTER(tensor, [x.index for x in devs], sizes, d, None))
    chunks = tensor.chunk(len(devs), d) if sizes is None else tensor.split(sizes, d)
    home, k = tensor.device, len(chunks)
    targets = devs[:k] if k < len(devs) else devs
    if targets.count(home) == k:  # every chunk is already where it goes: views, as torch returns
        return tuple(chunks)
    if tensor.is_cpu:
        if _direct_from_host(tensor, d, sizes, len(devs)):
            return _scatter_from_host(chunks, targets, strs)
        if _pin_once(tensor, devs):
            return scatter(_host.pinned_copy(tensor), devs, chunk_sizes, d, streams)
    cuda = tensor.is_cuda or any(x.type == "cuda" for x in targets)
    results, pairs = list(chunks), []
    for i, dev in enumerate(targets):
        if dev != home:
            new = results[i] = empty_like_on(chunks[i], dev, pinned=cuda)
            pairs.append((new, chunks[i], None if strs is None else strs[i]))
    _copy.copy_all(pairs)
    return tuple(results)


_TORCH_SCATTER = _kernels.SCATTER  # torch.cuda.comm.scatter's C++ (CUDA builds only)
_TORCH_SCATTER_OUT = _kernels.SCATTER_OUT  # its out= twin
_CPU = torch.device("cpu")
_STRIDED = torch.strided


def _direct_from_host(tensor: torch.Tensor, d: int, sizes: list[int] | None, n: int) -> bool:
    """Chunks of a host tensor go straight to their devices when every chunk is small (latency-bound:
    the driver's own staging is cheaper than ours) or the source is pinned with contiguous chunks.

    Decided from sizes alone, before anything is split; pinned-ness is asked once, not per chunk.
    """
    along = tensor.shape[d]
    biggest = (-(-along // n) if sizes is None else max(sizes, default=0)) if along else 0
    if biggest * (tensor.numel() // along if along else 0) * tensor.element_size() <= _host.DIRECT_MAX_BYTES:
        return True
    return tensor.is_contiguous() and math.prod(tensor.shape[:d]) == 1 and tensor.is_pinned()


def _scatter_from_host(chunks: tuple[torch.Tensor, ...], targets: list[torch.device],
                       streams: list | None) -> tuple[torch.Tensor, ...]:
    # torch.cuda.comm.scatter's loop: chunk.to(device, non_blocking=True), under the chunk's stream.
    # Allocated while that stream is current, a result belongs to it: no record_stream needed.
    results = []
    for i, (chunk, dev) in enumerate(zip(chunks, targets, strict=False)):
        s = None if streams is None else streams[i]
        if dev.type == "cpu":
            results.append(chunk)  # a CPU slot is a view of the input, as torch returns it
        elif s is None:
            results.append(chunk.to(dev, non_blocking=True))
        else:
            with torch.cuda.stream(s):
                results.append(chunk.to(dev, non_blocking=True))
    return tuple(results)


def _pin_once(tensor: torch.Tensor, devices: list[torch.device]) -> bool:
    """A small pageable source is pinned whole, once, instead of staging every chunk separately."""
    return (tensor.numel() * tensor.element_size() <= _host.PIECE_BYTES and tensor.is_contiguous()
            and torch.device("cpu") not in devices  # CPU slots must stay views of the input itself
            and any(x.type == "cuda" for x in devices) and not tensor.is_pinned())


def _chunk_sizes(chunk_sizes: Any, n: int, size: int, dim: int) -> list[int]:
    if isinstance(chunk_sizes, int | str | torch.Tensor):
        raise fail_type("chunk_sizes", "a sequence of ints, one per device", chunk_sizes)
    try:
        sizes = [check_int(c, f"chunk_sizes[{i}]") for i, c in enumerate(chunk_sizes)]
    except TypeError as e:
        if "chunk_sizes[" in str(e):
            raise
        raise fail_type("chunk_sizes", "a sequence of ints, one per device", chunk_sizes) from None
    if len(sizes) != n:
        raise fail_value("chunk_sizes", f"{n} sizes (one per device, len(devices) = {n})",
                         f"{len(sizes)} sizes {sizes}", "give one size per device")
    for i, s in enumerate(sizes):
        if s < 0:
            raise fail_value(f"chunk_sizes[{i}]", "a non-negative size", f"{s}")
    if sum(sizes) != size:
        raise fail_value("chunk_sizes", f"sizes summing to tensor.size({dim}) = {size}",
                         f"{sizes}, which sum to {sum(sizes)}", "make the sizes add up to the tensor's size")
    return sizes


def _scatter_out(tensor: torch.Tensor, out: Any, devices: Any, chunk_sizes: Any, dim: int,
                 streams: Any) -> tuple[torch.Tensor, ...]:
    outs, d, strs = check_scatter_out(tensor, out, devices, chunk_sizes, dim, streams)
    scatter_into(tensor, outs, d, strs, overlap=_copy.any_overlap(outs, [tensor]))
    return tuple(outs)


def check_scatter_out(tensor: torch.Tensor, out: Any, devices: Any, chunk_sizes: Any, dim: Any,
                      streams: Any) -> tuple[list[torch.Tensor], int, list | None]:
    """:func:`scatter`'s checks when ``out`` is given (``tensor`` already checked): ``(outs, dim, streams)``."""
    for name, value in (("devices", devices), ("chunk_sizes", chunk_sizes)):
        if value is not None:
            raise TypeError(f"scatter: '{name}' must not be given together with 'out' (got {name}="
                            f"{describe(value)}); the devices and sizes come from the out tensors")
    outs = check_tensors(out, "out")
    check_disjoint(outs)
    nd = tensor.dim()
    d = check_dim(dim, nd, what="tensor")
    shape = tensor.shape
    before, after = shape[:d], shape[d + 1:]
    if all(o.layout is _STRIDED and o.dim() == nd and o.shape[:d] == before and o.shape[d + 1:] == after
           for o in outs) and sum(o.shape[d] for o in outs) == shape[d]:  # the common case, in one pass
        return outs, d, check_streams(streams, [o.device for o in outs]) if streams is not None else None
    total = 0
    for i, o in enumerate(outs):
        _dense(o, f"out[{i}]")
        want = list(tensor.shape)
        if o.dim() == tensor.dim():
            want[d] = o.shape[d]
        if list(o.shape) != want:
            raise fail_value(f"out[{i}]", f"the source's shape {list(tensor.shape)} in every dim but "
                             f"dim={d}", f"shape {list(o.shape)}")
        total += o.shape[d]
    if total != tensor.shape[d]:
        raise fail_value("out", f"sizes along dim {d} summing to the source's {tensor.shape[d]}",
                         f"sizes {[o.shape[d] for o in outs]} (total {total})")
    return outs, d, check_streams(streams, [o.device for o in outs])


def scatter_into(tensor: torch.Tensor, outs: list[torch.Tensor], d: int, strs: list | None, *,
                 overlap: bool) -> None:
    """:func:`scatter`'s copies into checked ``outs`` (``overlap``: whether some output overlaps ``tensor``)."""
    if (strs is None and _TORCH_SCATTER_OUT is not None and not overlap and tensor.is_cuda
            and all(o.is_cuda for o in outs)):
        # GPU to GPU with nothing aliased: torch's own C++ loop issues the same copies without a
        # Python round trip per chunk (everything it checks has been checked above, with our messages).
        _TORCH_SCATTER_OUT(tensor, outs, d, None)
        return
    chunks = tensor.split_with_sizes([o.shape[d] for o in outs], d)  # Tensor.split's Python wrapper costs µs
    if strs is None:
        pairs = list(zip(outs, chunks, strict=True))
    else:
        pairs = [(o, c, s) for o, c, s in zip(outs, chunks, strs, strict=True)]
    _copy.copy_all(_copy.protect(pairs, outs) if overlap else pairs)


def scatter_outputs(tensor: torch.Tensor, devices: Any, chunk_sizes: Any, dim: Any) -> list[torch.Tensor]:
    """Checked outputs for :func:`scatter` with ``devices``: a chunk already on its device is its view."""
    devs = devices_arg(devices)
    d = check_dim(dim, tensor.dim(), what="tensor")
    sizes = None if chunk_sizes is None else _chunk_sizes(chunk_sizes, len(devs), tensor.shape[d], d)
    chunks = tensor.chunk(len(devs), d) if sizes is None else tensor.split(sizes, d)
    cuda = tensor.is_cuda or any(x.type == "cuda" for x in devs)
    return [c if dev == tensor.device else empty_like_on(c, dev, pinned=cuda)
            for c, dev in zip(chunks, devs, strict=False)]


CAT_MAX_BYTES = 256 << 20
"""Largest result concatenated by one ``torch.cat`` when every input already sits on its device.

Above it the inputs are copied into their slices one by one (a ``cudaMemcpyAsync`` each for dim-0
slices), as torch.cuda.comm.gather does.  On one H200 (4 x cuda:0, dim 0) the single cat kernel ran
1.11x torch's copies at 128 MiB, 0.99x at 512 MiB and 0.96x at 1 GiB
(benchmarks/results/comm-vs-torch-recheck_h200x1_2026-12-02.txt): the launches it saves stop
mattering and the copy engine path moves the bytes faster.
"""


def cat_fits(result: torch.Tensor) -> bool:
    """Whether a gather into ``result`` from inputs on its device is one ``torch.cat`` (see CAT_MAX_BYTES)."""
    return result.nbytes <= CAT_MAX_BYTES or not result.is_cuda


_HOST_CAT_MAX_BYTES = 1 << 20
"""Below this, inputs on one GPU are concatenated there and sent to the host in one copy, not n."""


def default_destination(tensors: list[torch.Tensor]) -> torch.device:
    """torch's default (the current CUDA device) when any tensor is on a GPU, else the CPU."""
    if any(t.is_cuda for t in tensors):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather(tensors: Any, dim: int = 0, destination: Any = None, *, out: Any = None) -> torch.Tensor:
    """Concatenate ``tensors`` along ``dim`` on one device (drop-in for ``torch.cuda.comm.gather``).

    Semantics:
        * **Concatenates**, never stacks: three ``[3]`` tensors give one ``[9]`` tensor.  All dims but
          ``dim`` must match.  The result has ``tensors[0]``'s dtype (others are cast).
        * ``destination``: a device, ``'cpu'``, or the deprecated ``-1`` (= CPU, with torch's
          FutureWarning).  Default: the current CUDA device when any input is on a GPU (torch's
          default), the CPU when every input is on the CPU.
        * With ``out`` the result is written there (shape must be the concatenated shape) and
          ``destination`` must be omitted; ``out`` may be on the CPU or a GPU.
        * A CPU result gathered from GPUs is complete on return.  Above ``_host.DIRECT_MAX_BYTES``
          (256 KiB) it is allocated in pinned memory and every device's copy is issued before any is
          waited on (the pinned tensor itself is returned); smaller results are pageable and filled
          as torch fills them (latency-bound copies, where pinning costs more than it saves).

    Returns:
        ``Tensor``: the concatenation (or ``out``).
    """
    if out is not None and destination is None and _lean_gather(tensors, dim, out, None):
        return out
    ts, d, shape, o = check_gather(tensors, dim, destination, out)
    if o is not None:
        _gather_into(ts, o, d, fresh=False)
        return o
    result = gather_output(ts, shape, destination)
    _gather_into(ts, result, d, fresh=True)
    return result


def _lean_gather(ts: Any, dim: Any, out: Any, devices: list[torch.device] | None) -> bool:
    """``gather(ts, dim, out=out)`` as one ``torch.cat`` when every tensor shares one device (``devices``: the
    inputs', when the caller knows them), in one pass: True when done, False when nothing was written.

    ``torch.cat(out=)`` refuses before writing anything what it checks itself: inputs that differ in any dim
    but ``dim`` or sit on other devices, an output they cannot be cast to, an output overlapping an input, a
    0-dim input, a dim out of range, any tensor that needs autograd.  It does not refuse an output of the
    wrong shape (it resizes it) or a 1-d empty input among others (it skips it, where gathering refuses it),
    so the concatenated shape is asked here; the named checks (:func:`check_gather`) decide anything else.
    """
    try:
        if not ((type(ts) is list or type(ts) is tuple) and ts) or type(dim) is not int or type(out) is not torch.Tensor:
            return False
        cat = cat_shape(list(map(SHAPE_OF, ts)), dim)
        if cat is None:
            return False
        d, shape = cat
        devices = devices or one_device(ts)
        if devices is None or out.device != devices[0] or out.shape != shape or not cat_fits(out):
            return False
        torch.cat(ts, d, out=out)
        return True
    except TORCH_REFUSALS:
        return False


def check_gather(tensors: Any, dim: Any, destination: Any, out: Any) -> tuple:
    """:func:`gather`'s checks: ``(inputs, dim, concatenated shape, out or None)``."""
    ts = check_tensors(tensors, "tensors")
    if not all(t.layout == torch.strided for t in ts):
        for i, t in enumerate(ts):
            _dense(t, f"tensors[{i}]")
    d = check_dim(dim, ts[0].dim(), what="tensors[0]")
    shape = check_cat_shapes(ts, d, "tensors")
    if out is None:
        return ts, d, shape, None
    if destination is not None:
        raise TypeError(f"gather: 'destination' must not be given together with 'out' (got destination="
                        f"{describe(destination)}); the result goes to out's device")
    o = check_tensor(out, "out")
    check_tensors([o], "out")
    _dense(o, "out")
    if list(o.shape) != shape:
        raise fail_value("out", f"shape {shape} (the inputs concatenated along dim {d})",
                         f"shape {list(o.shape)}")
    if torch.is_grad_enabled() and (o.requires_grad or any(t.requires_grad for t in ts)):
        arg, t = ("out", o) if o.requires_grad else next((f"tensors[{i}]", t) for i, t in enumerate(ts)
                                                          if t.requires_grad)
        raise fail_value(arg, "a tensor that does not require grad when out= is given (out= writes are not "
                         "differentiable)", describe(t) + " with requires_grad=True",
                         "detach it, run under torch.no_grad(), or omit out= to get a new tensor")
    return ts, d, shape, o


def gather_output(ts: list[torch.Tensor], shape: list[int], destination: Any) -> torch.Tensor:
    """A new result for :func:`gather` on ``destination`` (checked here).

    A host result is pinned when a GPU takes part and it is big enough for pinning to pay
    (empty_on's rule); a small one is pageable, filled the way torch fills it.
    """
    dest = _destination(destination, ts)
    pinned = any(t.is_cuda for t in ts)
    return empty_on(shape, ts[0].dtype, dest, pinned=pinned, memory_format=suggest_memory_format(ts))


def _destination(destination: Any, ts: list[torch.Tensor]) -> torch.device:
    if destination is None:
        return default_destination(ts)
    if isinstance(destination, int) and not isinstance(destination, bool) and destination == -1:
        warnings.warn(_MINUS_ONE_WARNING, FutureWarning, stacklevel=4)  # gather -> gather_output -> here
        return torch.device("cpu")
    return destination_arg(destination)


def _cast(ts: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    return [t if t.dtype == dtype else t.to(dtype) for t in ts]


def _gather_into(ts: list[torch.Tensor], result: torch.Tensor, d: int, *, fresh: bool) -> None:
    dest = result.device
    safe = fresh or not _copy.any_overlap([result], ts)  # storages first: no extent arithmetic when disjoint
    if safe and [t.device for t in ts].count(dest) == len(ts) and cat_fits(result):
        torch.cat(_cast(ts, result.dtype), d, out=result)  # one kernel instead of n copies
        return
    outer = math.prod(result.shape[:d])
    if dest.type == "cpu" and any(t.is_cuda for t in ts):
        small = result.numel() * result.element_size() <= _HOST_CAT_MAX_BYTES
        if outer > 1 or (small and len({t.device for t in ts}) == 1):
            _gather_strided_to_host(ts, result, d)
            return
    pairs, offset = [], 0
    for t in ts:
        pairs.append((result.narrow(d, offset, t.shape[d]), t))
        offset += t.shape[d]
    _copy.copy_all(pairs if fresh else _copy.protect(pairs, [result]))


def _gather_strided_to_host(ts: list[torch.Tensor], result: torch.Tensor, d: int) -> None:
    # Slices of a host result along an inner dim are strided; a device-to-host copy into a strided
    # slice would go through pageable temporaries.  Concatenate on the GPU when all inputs share one,
    # else land each input in its own pinned buffer (all devices at once) and concatenate on the host.
    devices = {t.device for t in ts}
    if len(devices) == 1:
        _copy.copy_all([(result, torch.cat(_cast(ts, result.dtype), d))])
        return
    stages = [empty_on(t.shape, result.dtype, torch.device("cpu"), pinned=True) for t in ts]
    _copy.copy_all(list(zip(stages, ts, strict=True)))
    torch.cat(stages, d, out=result)


# ----- prepared ---------------------------------------------------------------------------------------
def bind_scatter(src: torch.Tensor, outs: list[torch.Tensor], dim: int = 0,
                 streams: list | None = None) -> _kernels.Run:
    """:func:`scatter_into` on checked outputs with its route decided once."""
    overlap = _copy.any_overlap(outs, [src])
    chunks = list(src.split([o.shape[dim] for o in outs], dim))
    if overlap and all(_copy.same_view(o, c) for o, c in zip(outs, chunks, strict=True)):
        return _kernels.noop  # every output is its own chunk of the source: nothing to move
    if not overlap and streams is None:
        if _TORCH_SCATTER_OUT is not None and src.is_cuda and all(o.is_cuda for o in outs):
            return functools.partial(_TORCH_SCATTER_OUT, src, outs, dim, None)  # torch.cuda.comm's own C++ loop
        if _kernels.one_device(outs, src):
            return _kernels.bind_copies(outs, chunks)
    return functools.partial(scatter_into, src, outs, dim, streams, overlap=overlap)


def bind_gather(ts: list[torch.Tensor], out: torch.Tensor, dim: int = 0) -> _kernels.Run:
    """:func:`_gather_into` on a checked output with its route decided once."""
    fresh = not _copy.any_overlap([out], ts)
    if fresh and _kernels.one_device(ts, out) and all(t.dtype == out.dtype for t in ts) and cat_fits(out):
        return functools.partial(torch.cat, ts, dim, out=out)  # one kernel instead of n copies
    return functools.partial(_gather_into, ts, out, dim, fresh=fresh)


@prepared_form("scatter")
def _prepared_scatter(inputs, outputs, devices=None, chunk_sizes=None, dim=0, streams=None):
    check_tensor(inputs, "inputs")
    if outputs is None:
        if devices is None:
            raise TypeError("prepare('scatter'): expected devices= or outputs=, but got neither")
        outputs = scatter_outputs(inputs, devices, chunk_sizes, dim)
        devices = chunk_sizes = None
    outs, d, strs = check_scatter_out(inputs, outputs, devices, chunk_sizes, dim, streams)
    return bind_scatter(inputs, outs, d, strs), tuple(outs), outs


@prepared_form("gather")
def _prepared_gather(inputs, outputs, dim=0, destination=None, root=None):
    destination = destination if root is None else root  # the Communicator's name for it
    ts, d, shape, out = check_gather(inputs, dim, destination, outputs)
    if out is None:
        out = gather_output(ts, shape, destination)
    return bind_gather(ts, out, d), out, [out]


@_kernels.local_form("scatter")
def _local_scatter(held, inputs, outputs, root, op, extra):
    src = inputs[root]
    if _kernels.scatter_out(src, outputs, 0) is None:
        scatter(src, out=outputs)


@_kernels.local_form("gather")
def _local_gather(held, inputs, outputs, root, op, extra):
    if not _lean_gather(inputs, 0, outputs[root], held.one_device):
        gather(inputs, 0, out=outputs[root])
