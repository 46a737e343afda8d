"""Host transfers through pinned memory, every device's host link driven at once.

torch.cuda.comm copies one slot at a time and through pageable memory when one end is the CPU
(a pageable copy is staged by the driver and blocks the host).  Here:

* **small transfers** (at most :data:`DIRECT_MAX_BYTES`) run exactly as torch runs them: one
  ``copy_`` each, through the driver's own staging.
* **device → host** (:func:`start_device_to_host`): every larger copy is issued asynchronously into pinned
  memory (torch's caching host allocator, ``torch.empty(..., pin_memory=True)``) before any is waited
  on, so each GPU's link runs in parallel; :meth:`Pending.finish` synchronises only the devices that
  were read and then, for destinations that are not themselves pinned and contiguous, copies the
  staged bytes into them.
* **host → device** (:func:`host_to_device`): a pinned contiguous source is copied directly.  A
  larger pageable (or strided) source is copied into pinned staging in pieces of :data:`PIECE_BYTES`; each
  piece's host-to-device copy is asynchronous, so the host memcpy of piece k+1 overlaps the DMA of
  piece k.  Pieces are issued round-robin across sources, a source going to several devices
  (broadcast) is staged once per piece for all of them, and the caching host allocator keeps a
  piece's pinned block alive until its copies have finished (it records an event per async copy).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

__all__ = ["DIRECT_MAX_BYTES", "PIECE_BYTES", "Pending", "host_to_device", "pinned_copy", "pinned_empty",
           "start_device_to_host"]

PIECE_BYTES = 8 << 20
"""Bytes per pinned staging piece for pageable host-to-device copies."""

DIRECT_MAX_BYTES = 256 << 10
"""Host transfers of at most this many bytes (per copy) skip pinned staging and run as torch runs them.

Small transfers are latency-bound: the pinned path's fixed costs (a block from the caching host
allocator, an event recorded for it, a stream synchronisation) exceed what the driver's own staging
of a pageable copy costs.  On an H200, torch.cuda.comm.gather to the CPU beat the pinned path up to
32 KiB and lost from 512 KiB on (8 B - 64 MiB sweep, factor 16); pageable scatters lost to torch up
to 512 KiB.  Below the threshold a pageable host-to-device copy is one ``copy_(non_blocking=True)``
(the driver stages it before returning, so the source may be reused at once) and a device-to-host
copy is one blocking ``copy_`` (pinned or not: asking which costs a driver call).
"""

Pair = tuple[torch.Tensor, torch.Tensor]


def pinned_empty(shape: Sequence[int], dtype: torch.dtype,
                 memory_format: torch.memory_format = torch.contiguous_format) -> torch.Tensor:
    """An uninitialised pinned host tensor (from torch's caching host allocator)."""
    return torch.empty(tuple(shape), dtype=dtype, pin_memory=True, memory_format=memory_format)


def pinned_copy(t: torch.Tensor) -> torch.Tensor:
    """A pinned, contiguous copy of a host tensor."""
    stage = pinned_empty(t.shape, t.dtype)
    return stage.copy_(t)


def _direct(t: torch.Tensor) -> bool:
    return t.is_contiguous() and t.is_pinned()


class Pending:
    """Device-to-host copies in flight; :meth:`finish` waits for them and completes staged ones."""

    def __init__(self, devices: set[torch.device], staged: list[Pair]):
        self._devices = devices
        self._staged = staged

    def finish(self) -> None:
        for dev in self._devices:
            torch.cuda.current_stream(dev).synchronize()
        for dst, stage in self._staged:
            dst.copy_(stage)


def start_device_to_host(pairs: Sequence[Pair]) -> Pending:
    """Issue every (cpu dst, cuda src) copy asynchronously; return the :class:`Pending` to finish."""
    devices: set[torch.device] = set()
    staged: list[Pair] = []
    for dst, src in pairs:
        if dst.nbytes <= DIRECT_MAX_BYTES:
            dst.copy_(src)  # small: torch's blocking copy (it waits on src's current stream)
            continue
        devices.add(src.device)
        if _direct(dst):
            dst.copy_(src, non_blocking=True)
        else:
            stage = pinned_empty(src.shape, dst.dtype)
            stage.copy_(src, non_blocking=True)
            staged.append((dst, stage))
    return Pending(devices, staged)


def host_to_device(copies: Sequence[tuple]) -> None:
    """Issue every (cuda dst, cpu src, stream-or-None) copy; pageable sources go through pinned pieces."""
    groups: dict[int, tuple[torch.Tensor, list[tuple]]] = {}
    for dst, src, stream in copies:
        if src.nbytes <= DIRECT_MAX_BYTES or _direct(src):  # small pageable: the driver stages it, as in torch
            _h2d(dst, src, stream)
        else:
            groups.setdefault(id(src), (src, []))[1].append((dst, stream))
    if not groups:
        return
    feeds = [_pieces(src, dsts) for src, dsts in groups.values()]
    while feeds:  # round-robin: one piece per source per turn, so every link stays busy
        feeds = [f for f in feeds if next(f, None) is not None]


def _h2d(dst: torch.Tensor, src: torch.Tensor, stream: torch.cuda.Stream | None) -> None:
    if stream is None:
        dst.copy_(src, non_blocking=True)
    else:
        with torch.cuda.stream(stream):
            dst.copy_(src, non_blocking=True)
        dst.record_stream(stream)  # written on the caller's stream: no reuse before it gets there


def _pieces(src: torch.Tensor, dsts: list[tuple]) -> Iterator[bool]:
    flat = src.is_contiguous() and all(d.is_contiguous() and d.dtype == src.dtype for d, _ in dsts)
    if not flat or src.numel() == 0:
        stage = pinned_empty(src.shape, src.dtype)
        stage.copy_(src)
        for d, stream in dsts:
            _h2d(d, stage, stream)
        yield True
        return
    s = src.reshape(-1)
    ds = [(d.view(-1), stream) for d, stream in dsts]
    step = max(1, PIECE_BYTES // src.element_size())
    for start in range(0, s.numel(), step):
        stop = min(start + step, s.numel())
        stage = pinned_empty((stop - start,), src.dtype)
        stage.copy_(s[start:stop])
        for d, stream in ds:
            _h2d(d[start:stop], stage, stream)
        yield True
