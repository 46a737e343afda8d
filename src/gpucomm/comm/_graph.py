"""CUDA-graph capture of a prepared collective: one ``replay()`` instead of every launch and Python step."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

from gpucomm._validate import fail_value

__all__ = ["capture"]

WARMUP_CALLS = 3
"""Calls run on a side stream before capture, as torch's CUDA-graph notes ask: they create the cached
side streams, events, NCCL communicators and allocator blocks that a capture must not create."""


def capture(run: Callable[[], object], devices: Sequence[torch.device]) -> Callable[[], None]:
    """Capture ``run`` into a ``torch.cuda.CUDAGraph`` and return its ``replay``.

    Every participant must be on one and the same CUDA device (a repeated device list such as
    ``[cuda:0] * 4``): a CPU participant (or a host result) needs the host to wait, which a graph
    cannot record, and this capture records one device's streams only.  The buffers ``run``
    touches must stay allocated (and keep their shapes) for as long as the replay is used; the
    caller's buffers are the caller's to keep, and whatever ``run`` itself holds (a bound kernel's
    scratch buffer, its argument lists) is kept here, for the lifetime of the returned replay.
    The warm-up calls really run the collective: buffers it writes in place (an in-place
    all-reduce) hold its result afterwards, as after any call.
    """
    cpu = [str(d) for d in devices if d.type != "cuda"]
    if cpu:
        raise fail_value("graph", "graph=True only when every participant is on a CUDA device",
                         f"devices {[str(d) for d in devices]} ({', '.join(cpu)} is not a GPU)",
                         "use graph=False: CUDA graphs record GPU work only")
    distinct = sorted({str(d) for d in devices})
    if len(distinct) > 1:
        raise fail_value("graph", "graph=True only when every participant is on one CUDA device",
                         f"devices {distinct}", "use graph=False across GPUs: the capture records one "
                         "device's streams, and work on the other devices' streams would escape it")
    device = devices[0]
    with torch.cuda.device(device):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
    # The graph records raw device addresses.  A buffer that only ``run`` references (the scratch
    # buffer a stacked reduction allocates at bind time) would be freed with ``run`` when this
    # function returns, handed by the caching allocator to the caller's next tensor, and then
    # overwritten by every replay.  The graph (which the bound ``replay`` holds) keeps ``run``.
    try:
        graph.gpucomm_run = run
    except AttributeError:  # a CUDAGraph class without an instance dict: a partial holds both
        return functools.partial(_replay, graph, run)
    return graph.replay


def _replay(graph, run: Callable[[], object]) -> None:
    """``graph.replay()``; ``run`` is an argument only so that it lives as long as the replay."""
    del run
    graph.replay()
