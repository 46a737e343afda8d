"""The copy path: move many tensors at once, overlapping what can overlap, syncing only where needed.

:func:`copy_all` performs ``dst.copy_(src)`` for a batch of pairs.  Its contract:

* On return every CUDA destination is ready **on its device's current stream** (or on the stream the
  caller named for that destination, torch.cuda.comm.scatter's ``streams=`` semantics), every source
  may be overwritten on its device's current stream, and every CPU destination is complete (a CPU
  result is the only thing that makes us synchronise the host).
* Large cross-device copies run on cached side streams, one per (device, peer) pair, so that copies
  out of one GPU to many peers (scatter, broadcast) or into one GPU from many peers (gather) proceed
  at once.  torch's own ``copy_`` runs a cross-device copy on the *source's* current stream and makes
  the destination's current stream wait for it, so a loop of plain copies is serialised; setting
  both devices' current streams to per-peer side streams for the duration of each copy lifts that.
  Side streams first wait on the caller's current streams (cached events, no allocation per call),
  tensors are ``record_stream``-ed on them, and the current streams wait on the side streams at the
  end.
* Small copies (below :data:`OVERLAP_MIN_BYTES`) and copies within one device are latency-bound:
  they are issued as torch issues them (``copy_(non_blocking=True)``), but all of a call's at once
  through :func:`copy_many` (``torch._foreach_copy_``: one fused kernel when they share a GPU, one
  C++ loop otherwise), so a repeated device list pays one launch, not one per copy.
* Host transfers go through :mod:`gpucomm.comm._host` (pinned staging).
* :func:`protect` snapshots sources that an output overlaps, so ``out=`` may alias inputs.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence

import torch

from gpucomm.comm import _host

__all__ = ["FOREACH_MAX_BYTES", "FOREACH_MIN_COPIES", "OVERLAP_MIN_BYTES", "Copy", "Pair", "any_overlap", "copy_all", "copy_many",
           "overlapping_pair", "overlaps", "protect", "same_view", "side_stream"]

OVERLAP_MIN_BYTES = 1 << 20
"""Cross-device copies at least this large run on side streams; smaller ones are issued like torch's."""

Pair = tuple[torch.Tensor, torch.Tensor]  # (dst, src)
Copy = tuple[torch.Tensor, torch.Tensor, "torch.cuda.Stream | None"]  # (dst, src, stream for dst or None)

_STREAMS: dict[tuple[int, int], torch.cuda.Stream] = {}
_LOCAL = threading.local()  # events are per thread: a record and its wait must not interleave with another's


def side_stream(device: int, peer: int) -> torch.cuda.Stream:
    """The cached side stream on ``device`` used for copies exchanged with ``peer`` (-1 = host)."""
    key = (device, peer)
    s = _STREAMS.get(key)
    if s is None:
        s = _STREAMS[key] = torch.cuda.Stream(device=device)
    return s


def _event(device: int, peer: int, role: int) -> torch.cuda.Event:
    events = getattr(_LOCAL, "events", None)
    if events is None:
        events = _LOCAL.events = {}
    key = (device, peer, role)
    e = events.get(key)
    if e is None:
        e = events[key] = torch.cuda.Event()
    return e


def _wait(waiter: torch.cuda.Stream, signaller: torch.cuda.Stream, event: torch.cuda.Event) -> None:
    # A cached event may be re-recorded: cudaStreamWaitEvent captures the record current at call time.
    event.record(signaller)
    waiter.wait_event(event)


# ----- aliasing ------------------------------------------------------------------------------------
def _extent(t: torch.Tensor) -> tuple[int, int]:
    if t.numel() == 0:
        return (0, 0)
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True))
    start = t.data_ptr()
    return (start, start + span * t.element_size())


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the memory ranges of ``a`` and ``b`` may overlap (conservative for strided tensors)."""
    if a.device != b.device or a.is_sparse or b.is_sparse:
        return False
    if _storage(a) != _storage(b):  # memory can only overlap within one storage; cheaper than extents
        return False
    a0, a1 = _extent(a)
    b0, b1 = _extent(b)
    return a0 < b1 and b0 < a1


def any_overlap(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> bool:
    """True when some output may overlap some input (storages compared first: O(n), not O(n^2))."""
    shared = _storages(outputs) & _storages(inputs)
    if not shared:
        return False
    return any(overlaps(o, t) for o in outputs for t in inputs
               if _storage(o) in shared and _storage(t) == _storage(o))


def overlapping_pair(ts: Sequence[torch.Tensor], *, same_view_ok: bool = False) -> tuple[int, int] | None:
    """A pair ``(i, j)``, ``i < j``, of tensors whose memory overlaps (None: pairwise disjoint).

    Tensors in distinct storages are disjoint, so the common case costs one pass; otherwise the memory
    spans are sorted and only neighbours compared (chunks of one buffer: k log k, not k²).  Empty
    tensors hold no memory.  ``same_view_ok``: the very same view listed twice does not count.
    """
    if len(_storages(ts)) == len(ts):
        return None
    spans = []
    for k, t in enumerate(ts):
        if t.layout != torch.strided or not t.numel():
            continue
        if t.is_contiguous():
            start = t.data_ptr()
            spans.append((start, start + t.nbytes, k))
        else:
            spans.append((*_extent(t), k))
    spans.sort()
    reach, holder = -1, -1  # the furthest end so far, and whose it is
    for start, end, k in spans:
        if start < reach:
            a, b = ts[holder], ts[k]
            if overlaps(a, b) and _share_an_element(a, b) and not (same_view_ok and same_view(a, b)):
                return min(holder, k), max(holder, k)
        if end > reach:
            reach, holder = end, k
    return None


def _share_an_element(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views of one storage whose spans overlap really share an element, decided exactly when
    they have the same strides and those strides are nested (chunks of one tensor along any dim:
    interleaved columns are disjoint although their spans overlap); True (conservative) otherwise.

    An element of ``a`` meets one of ``b`` when ``sum(d_k * stride_k) = offset_b - offset_a`` for some
    ``-(b.size(k)-1) <= d_k <= a.size(k)-1``.  When every stride exceeds the whole range the smaller
    dims can add, each ``d_k`` is the only one that leaves a reachable remainder: taken largest first.
    """
    if a.stride() != b.stride():
        return True
    dims = sorted((st, a.shape[k] - 1, b.shape[k] - 1) for k, st in enumerate(a.stride())
                  if a.shape[k] > 1 or b.shape[k] > 1)
    lows, highs, low, high = [], [], 0, 0  # what the dims below each one can add, at least and at most
    for st, up, down in dims:
        if st <= high - low:
            return True  # not nested: the decomposition need not be unique
        lows.append(low)
        highs.append(high)
        low, high = low - down * st, high + up * st
    delta = b.storage_offset() - a.storage_offset()
    if not low <= delta <= high:
        return False
    for (st, up, down), lo, hi in zip(reversed(dims), reversed(lows), reversed(highs), strict=True):
        d = -((hi - delta) // st)  # the least d with delta - d * st <= hi: the only candidate
        if not (-down <= d <= up and delta - d * st >= lo):
            return False
        delta -= d * st
    return delta == 0


def same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when ``a`` and ``b`` are the very same view (address, device, shape, strides, dtype)."""
    return (a.data_ptr() == b.data_ptr() and a.device == b.device and a.shape == b.shape
            and a.stride() == b.stride() and a.dtype == b.dtype)


def protect(pairs: Sequence[Pair | Copy], outputs: Sequence[torch.Tensor]) -> list[Pair | Copy]:
    """Make ``pairs`` safe to run in any order although ``outputs`` may alias their sources.

    A pair whose destination *is* its source (the same view) is dropped: the copy is a no-op.  A
    source that any output overlaps otherwise is cloned first, on its device's current stream, so
    no copy reads memory another copy has already overwritten.
    """
    storages = _storages(outputs)
    if not storages:
        return [p for p in pairs if not same_view(p[0], p[1])]
    result = []
    for pair in pairs:
        dst, src = pair[0], pair[1]
        # memory can only overlap within one storage: the set test keeps this O(pairs), not O(pairs x outputs)
        if _storage(src) in storages:
            if same_view(dst, src):
                continue
            if any(overlaps(o, src) for o in outputs):
                pair = (dst, src.clone(), *pair[2:])
        result.append(pair)
    return result


_UNTYPED = torch.Tensor.untyped_storage
_STORAGE_PTR = torch.UntypedStorage.data_ptr


def _storages(ts: Sequence[torch.Tensor]) -> set[int]:
    """``{_storage(t) for t in ts}``, computed in C when every tensor is strided (the common case)."""
    try:
        return set(map(_STORAGE_PTR, map(_UNTYPED, ts)))
    except (RuntimeError, NotImplementedError):  # a sparse tensor has no storage
        return {_storage(t) for t in ts}


def _storage(t: torch.Tensor) -> int:
    # The storage's address (unique across devices under unified addressing; a clash between devices
    # would only cost an exact check, since overlaps() compares devices).  Non-strided: a private key.
    if t.layout != torch.strided:
        return -1 - id(t)
    return t.untyped_storage().data_ptr()


# ----- the executor --------------------------------------------------------------------------------
_FOREACH_COPY = getattr(torch, "_foreach_copy_", None)  # torch >= 2.1; the loop below is the fallback


FOREACH_MIN_COPIES = 6
"""Batches of at least this many GPU copies go through ``torch._foreach_copy_``; smaller ones loop.

On the CPU there is no launch to amortise and the C++ loop beats a Python one from two copies on
(4 copies of 8 B: about 6 µs against 11 µs on this project's 2-core CI machine).

A fused kernel costs about what a few small ``copy_`` calls (each a cudaMemcpyAsync) cost, so a
batch pays off from a handful of copies on (H200: a kernel launch ~7 us against ~1.3 us a memcpy).
"""

FOREACH_MAX_BYTES = 16 << 20
"""Copies larger than this (judged by the batch's first copy) loop instead of fusing.

Past some MiB per copy the launch cost no longer matters and the fused kernel moves bytes more
slowly than torch's own copy path.  On one H200, all_to_all over 4 slots of cuda:0 (chunks = a
quarter of the size): fused, 8 MiB chunks ran 1.44x torch, 32 MiB chunks 0.99x, 128-256 MiB chunks
0.86-0.88x; looping, 8 MiB chunks fell to 0.71x, 32-256 MiB chunks ran 1.00x
(benchmarks/results/comm-vs-torch_h200x1_2026-12-02.txt and the recheck beside it).
"""


def copy_many(dsts: Sequence[torch.Tensor], srcs: Sequence[torch.Tensor], *,
              dtypes: set[torch.dtype] | None = None) -> None:
    """``dsts[i].copy_(srcs[i], non_blocking=True)`` for every i, in one call where it pays.

    ``torch._foreach_copy_`` issues the whole batch from C++: one fused kernel when every tensor
    sits on one GPU with one dtype and matching sizes and strides (a repeated device list), else
    torch's own per-pair ``copy_`` loop, without a Python round trip per pair.  It has no autograd
    formula, so a batch touching tensors that require grad, and complex tensors (conjugate views),
    take the plain loop.  ``dtypes``: every dtype in the batch, when the caller already knows them.
    """
    if (_FOREACH_COPY is not None and (len(dsts) >= FOREACH_MIN_COPIES or len(dsts) > 1 and dsts[0].is_cpu)
            and dsts[0].nbytes <= FOREACH_MAX_BYTES and _batchable(dsts, srcs, dtypes)):
        _FOREACH_COPY(dsts, srcs, non_blocking=True)
        return
    for dst, src in zip(dsts, srcs, strict=True):
        dst.copy_(src, non_blocking=True)


_REQUIRES_GRAD = operator.attrgetter("requires_grad")
_DTYPE = operator.attrgetter("dtype")


def _batchable(dsts: Sequence[torch.Tensor], srcs: Sequence[torch.Tensor], dtypes: set[torch.dtype] | None) -> bool:
    if torch.is_grad_enabled() and (any(map(_REQUIRES_GRAD, dsts)) or any(map(_REQUIRES_GRAD, srcs))):
        return False
    if dtypes is None:
        dtypes = set(map(_DTYPE, dsts))
        dtypes.update(map(_DTYPE, srcs))
    return not any(d.is_complex for d in dtypes)


def copy_all(pairs: Sequence[Pair | Copy]) -> None:
    """``dst.copy_(src)`` for every pair, overlapped; see the module docstring for the contract.

    Args:
        pairs: ``(dst, src)`` or ``(dst, src, stream)`` tuples; sources must not overlap destinations
            (see :func:`protect`).  A stream (on dst's device) makes that copy run on it and leaves
            the result there: the caller synchronises, as with torch.cuda.comm.scatter's ``streams``.
    """
    host_in: list[Copy] = []
    host_out: list[Pair] = []
    side: list[Pair] = []
    plain: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])  # GPU to GPU, issued like torch
    local: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])  # CPU to CPU
    for pair in pairs:
        dst, src = pair[0], pair[1]
        stream = pair[2] if len(pair) > 2 else None
        dcuda, scuda = dst.is_cuda, src.is_cuda
        if dcuda and scuda:
            if stream is not None:
                with torch.cuda.stream(stream):
                    dst.copy_(src, non_blocking=True)
                dst.record_stream(stream)  # written there: keep its memory from reuse until that stream is past
            elif dst.nbytes >= OVERLAP_MIN_BYTES and dst.device != src.device:
                side.append((dst, src))
            else:
                plain[0].append(dst)
                plain[1].append(src)
        elif scuda:
            host_out.append((dst, src))
        elif dcuda:
            host_in.append((dst, src, stream))
        else:
            local[0].append(dst)
            local[1].append(src)
    if local[0]:
        copy_many(*local)
    if not (host_in or host_out or side):
        if plain[0]:
            copy_many(*plain)
        return
    pending = _host.start_device_to_host(host_out) if host_out else None
    if plain[0]:
        copy_many(*plain)
    if side:
        _copy_on_side_streams(side)
    if host_in:
        _host.host_to_device(host_in)
    if pending is not None:
        pending.finish()


def _copy_on_side_streams(pairs: Sequence[Pair]) -> None:
    used: dict[int, set[int]] = {}
    current: dict[int, torch.cuda.Stream] = {}
    for dst, src in pairs:
        a, b = src.device.index, dst.device.index
        for dev, peer in ((a, b), (b, a)):
            if dev not in current:
                current[dev] = torch.cuda.current_stream(dev)
            peers = used.setdefault(dev, set())
            if peer not in peers:
                peers.add(peer)
                _wait(side_stream(dev, peer), current[dev], _event(dev, peer, 0))
        sa, sb = side_stream(a, b), side_stream(b, a)
        with torch.cuda.stream(sa), torch.cuda.stream(sb):
            dst.copy_(src, non_blocking=True)
        src.record_stream(sa)
        dst.record_stream(sb)
    for dev, peers in used.items():
        for peer in peers:
            _wait(current[dev], side_stream(dev, peer), _event(dev, peer, 1))
