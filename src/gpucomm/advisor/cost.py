"""Cost formulas: collective time (alpha-beta), DDP's buckets and their overlap, the optimizer's traffic.

Pure functions of numbers, each with its source (``reference/cost-model.md``).  Times are seconds,
sizes bytes, bandwidths bytes/s unless a name says otherwise.  ``n`` is the participant count.

Collectives (ring, Thakur/Rabenseifner/Gropp 2005, as MPICH's comments and nccl-tests' busbw define them;
``S`` is the nccl-tests size: the larger buffer of one participant, B the busbw-style link bandwidth,
alpha the latency of one ring step):

* all_reduce: ``2(n-1)/n * S/B + 2(n-1) alpha``
* all_gather, reduce_scatter: ``(n-1)/n * S/B + (n-1) alpha``
* broadcast, reduce (pipelined chain): ``S/B + (n-1) alpha``
* all_reduce, double binary tree across machines: same bandwidth term, ``2 ceil(log2 m) alpha`` latency
  (NCCL tuning.cc: Tree latency ``2 log2(nNodes) interLat``; the formula rates tree and ring bandwidth equal,
  NCCL #1368).  Across machines the cheaper of ring and tree is taken, as NCCL's tuner takes the argmin.

Across ``m`` machines of ``g`` GPUs, collectives are hierarchical: intra-node reduce-scatter, inter-node
all-reduce of each GPU's 1/g shard (each GPU on its own NIC, so a machine's NICs together carry ``S``),
intra-node all-gather.  NCCL pipelines chunks through the stages, so by default the *bandwidth* terms
overlap — the step takes the slower tier, the intra-node reduce-scatter and all-gather adding up because
they share the NVLinks — while latencies add.  On 2-4 nodes of 8xH100 with 8x400G IB this gives
390-403 GB/s busbw against 365-470 measured (collective-bench.md §3); ``pipelined=False`` adds the tiers.

Memory lives in :mod:`gpucomm.advisor.memory`, compute and the step in :mod:`gpucomm.advisor.timing`; model
FLOPs are ``6 N_mm + 12 L h s`` per token (:meth:`gpucomm.models.Architecture.flops_per_token`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpucomm import collectives

__all__ = [
    "DDP_BUCKET_CAP_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "OPTIMIZER_BYTES_TOUCHED",
    "bucket_sizes",
    "hierarchical_s",
    "overlapped_exposed_s",
    "ring_all_gather_s",
    "ring_all_reduce_s",
    "ring_broadcast_s",
    "ring_reduce_scatter_s",
    "tree_all_reduce_s",
]

MiB = 2**20
_HIERARCHICAL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "scatter", "gather")
DDP_BUCKET_CAP_BYTES = 25 * MiB
"""DDP's default ``bucket_cap_mb=25`` (torch/nn/parallel/distributed.py; cost-model.md §2)."""
DDP_FIRST_BUCKET_BYTES = 1 * MiB
"""``dist._DEFAULT_FIRST_BUCKET_BYTES``: the small first bucket (cost-model.md §2)."""

OPTIMIZER_BYTES_TOUCHED = {"adam": 28, "sgd": 20}
"""Bytes of memory traffic per parameter in one optimizer step (the step is memory-bound).

Adam reads weights, gradients, both moments and writes weights and moments: 7 fp32 streams = 28 B;
SGD with momentum: weights r/w, gradient r, momentum r/w = 5 streams = 20 B.  Our count, not a citation.
"""


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: expected a participant count >= 1, but got {n!r}")


def ring_all_reduce_s(nbytes: float, n: int, bandwidth: float, alpha_s: float) -> float:
    """Ring all_reduce: ``2(n-1)/n * S/B + 2(n-1) alpha``; 0 for one participant."""
    _check_n(n)
    return 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * alpha_s


def ring_all_gather_s(nbytes: float, n: int, bandwidth: float, alpha_s: float) -> float:
    """Ring all_gather of an ``S``-byte output: ``(n-1)/n * S/B + (n-1) alpha``."""
    _check_n(n)
    return (n - 1) / n * nbytes / bandwidth + (n - 1) * alpha_s


ring_reduce_scatter_s = ring_all_gather_s
"""Ring reduce_scatter of an ``S``-byte input: the same cost as all_gather (MPICH, nccl-tests)."""


def ring_broadcast_s(nbytes: float, n: int, bandwidth: float, alpha_s: float) -> float:
    """Pipelined broadcast or reduce: ``S/B + (n-1) alpha`` (busbw factor 1); 0 for one participant."""
    _check_n(n)
    return 0.0 if n == 1 else nbytes / bandwidth + (n - 1) * alpha_s


def tree_all_reduce_s(nbytes: float, n: int, bandwidth: float, alpha_s: float) -> float:
    """Double-binary-tree all_reduce: ring's bandwidth term, ``2 ceil(log2 n) alpha`` latency."""
    _check_n(n)
    if n == 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bandwidth + 2 * math.ceil(math.log2(n)) * alpha_s


def hierarchical_s(op: str, nbytes: float, g: int, m: int, intra: tuple[float, float],
                   inter: tuple[float, float] | None, pipelined: bool = True) -> float:
    """A collective over ``m`` machines of ``g`` GPUs each (see the module docstring).

    Args:
        op: "all_reduce", "all_gather", "reduce_scatter"; "broadcast", "reduce", "scatter", "gather"
            on one machine only.
        nbytes: the nccl-tests size S.
        intra: (bandwidth B/s per GPU, alpha s) of the link inside a machine.
        inter: (bandwidth B/s per machine, all NICs, alpha s) between machines; needed when m > 1.
        pipelined: overlap the tiers' bandwidth terms (NCCL pipelines chunks); False adds them.
    """
    _check_n(g)
    _check_n(m)
    bi, ai = intra
    if op not in _HIERARCHICAL_OPS:
        raise ValueError(f"op: expected one of {', '.join(_HIERARCHICAL_OPS)}, but got {op!r}")
    if m > 1 and op not in ("all_reduce", "all_gather", "reduce_scatter"):
        raise ValueError(f"{op} across machines is not modelled (DataParallel runs on one machine)")
    row = collectives.get(op)
    size = max(0, int(nbytes))
    # The collective's own row gives the bytes each participant sends and the sequential ring steps.
    intra_bw = row.wire_bytes(size, g) / bi
    intra_lat = row.ring_steps(g) * ai
    if m == 1:
        return intra_bw + intra_lat
    if inter is None:
        raise ValueError(f"m={m} machines but the profile has no inter-node network; pass --network")
    bn, an = inter
    inter_bw = row.wire_bytes(size, m) / bn
    steps = row.ring_steps(m)
    if op == "all_reduce":
        steps = min(steps, 2 * math.ceil(math.log2(m)))  # tree when cheaper
    lat = intra_lat + steps * an
    return lat + (max(intra_bw, inter_bw) if pipelined else intra_bw + inter_bw)


def bucket_sizes(total_bytes: int, cap: int = DDP_BUCKET_CAP_BYTES,
                 first: int = DDP_FIRST_BUCKET_BYTES) -> list[int]:
    """DDP's buckets in the order they fill during backward: a small first one, then ``cap``-sized ones."""
    if total_bytes <= 0:
        return []
    sizes = [min(first, total_bytes)]
    left = total_bytes - sizes[0]
    while left > 0:
        sizes.append(min(cap, left))
        left -= sizes[-1]
    return sizes


def overlapped_exposed_s(sizes: Sequence[float], times: Sequence[float], window_s: float,
                         start_s: float = 0.0) -> float:
    """Communication left exposed after a compute window that produces ``sizes`` bytes evenly.

    Chunk i becomes ready when the window has produced its bytes (cumulative share of ``window_s``,
    from ``start_s``); chunks go one after another on one communication stream, each taking
    ``times[i]``.  Returns how far the last one ends past the window's end: the last bucket can never
    overlap, and anything the stream could not keep up with is exposed too (cost-model.md §6.2).
    """
    total = float(sum(sizes))
    if total <= 0:
        return 0.0
    done, end = 0.0, start_s
    for size, t in zip(sizes, times, strict=True):
        done += size
        ready = start_s + window_s * done / total
        end = max(end, ready) + t
    return max(0.0, end - (start_s + window_s))
