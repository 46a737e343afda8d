"""The planner: evaluate one layout, or search every layout the job allows, and rank them.

Candidates: ``tp`` among the divisors of the heads that fit in a machine; ``pp`` among the divisors of the
GPU count left (at most the layers); ``cp`` 1, or powers of two up to 8 when a sequence is long enough to
need it (>= 8192 tokens); ``dp`` what remains (it must divide the global batch); every sharding scheme
(hsdp only across machines); micro-batches dividing the per-replica batch (up to :data:`MAX_MB`);
activation checkpointing none, selective, op, full; ``vpp`` 1, 2, 4 when pipelined.  Keys the user fixed
(``--layout``) are not searched.  Memory is computed first (it is cheap) and layouts that do not fit are
not timed unless nothing fits.

Layouts priced identically (ZeRO-3 and FSDP below DeepSpeed's live-parameter cap) are shown once, under the
FSDP name (:func:`distinct`).  Ranking (:func:`rank`): fitting layouts by predicted step time; the recommendation is the *simplest* layout
within :data:`TIE_MARGIN` of the fastest (fewest parallel dimensions and features in use, then DDP before
replicated before DataParallel: a smaller predicted gain is below the model's accuracy and no reason to run a
harder setup).  Each row's reason states its own step time.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

from gpucomm.advisor import layout as lay
from gpucomm.advisor import measured
from gpucomm.advisor.compute import source_for
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.memory import MemoryTerms, memory
from gpucomm.advisor.timing import StepTime, step_time

__all__ = ["MAX_MB", "TIE_MARGIN", "Job", "Plan", "candidates", "distinct", "evaluate", "rank", "search",
           "simplicity"]

MAX_MB = 16
"""Largest micro-batch searched (sequences); a --layout may give any."""
TIE_MARGIN = 0.05
"""Half the advisor's 10% accuracy target: a smaller predicted gain does not justify a harder layout."""


@dataclass(kw_only=True, slots=True)
class Plan:
    """One layout's prediction."""

    layout: Layout
    memory: MemoryTerms
    time: StepTime | None
    capacity: int | None
    tokens_per_s_per_gpu: float = 0.0
    mfu: float = 0.0
    rank: int | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.capacity is None or self.memory.total <= self.capacity


_WRAP_ORDER = {"none": 0, "ddp": 0, "replicated": 1, "dataparallel": 2}
"""DDP (or none) before our one-process replicated, before DataParallel: among layouts within the tie margin."""


def simplicity(layout: Layout) -> tuple[int, ...]:
    """Smaller is simpler: parallel dimensions and features in use, then sizes, then the wrapper."""
    used = ((layout.tp > 1) + (layout.pp > 1) + (layout.cp > 1) + (layout.vpp > 1) + (layout.shard != "none")
            + (layout.ac != "none") + layout.tp_overlap + layout.ag_overlap)
    return (used, layout.pp, layout.tp, layout.cp, lay.SHARDS.index(layout.shard), lay.AC.index(layout.ac),
            _WRAP_ORDER.get(layout.wrap, 3), -layout.mb)


def _memory(job: Job, layout: Layout) -> MemoryTerms:
    margin = source_for(job).margin_bytes(job, layout)  # measured by a compute profile, else None: assumed
    return memory(job, layout, None if margin is None else margin.value)


def evaluate(job: Job, layout: Layout) -> Plan:
    """Memory and time of one layout (checked first: raises :class:`~gpucomm.advisor.layout.LayoutError`)."""
    lay.check(layout, job.arch, gpus=job.gpus, gpus_per_node=job.gpus_per_node, global_batch=job.global_batch,
              seq=job.seq, nodes=job.nodes)
    return _timed(job, Plan(layout=layout, memory=_memory(job, layout), time=None,
                            capacity=job.profile.memory_bytes))


def _timed(job: Job, plan: Plan) -> Plan:
    t = step_time(job, plan.layout, measured.parts(job, plan.layout))
    plan.time = t
    plan.tokens_per_s_per_gpu = job.global_batch * job.seq / t.step_s / job.gpus
    peak = job.profile.peak_flops(job.dtype) or float("inf")
    plan.mfu = job.arch.flops_per_token(job.seq) * plan.tokens_per_s_per_gpu / peak
    return plan


@functools.lru_cache(maxsize=1024)
def _divisors(n: int) -> tuple[int, ...]:
    """Divisors of ``n``, ascending (trial division up to the square root: fast for a global batch of 1e9)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return tuple(small + large[::-1])


_PASSED = ("stages", "reshard", "tp_overlap", "ag_overlap", "wrapper")
"""Keys the search never varies: the user's stack and split, passed through as given."""


def candidates(job: Job, fixed: dict) -> list[Layout]:
    """Every layout consistent with the ``fixed`` keys that passes :func:`~gpucomm.advisor.layout.check`."""
    n, g = job.gpus, job.gpus_per_node
    keep = {k: fixed[k] for k in _PASSED if k in fixed}
    if "stages" in keep and sum(keep["stages"]) != job.arch.layers:
        return []  # search() lets layout.check name the rule
    one_process = keep.get("wrapper") in lay.ONE_PROCESS
    tps = [t for t in ([fixed["tp"]] if "tp" in fixed else _divisors(job.arch.heads))
           if t <= g and n % t == 0 and job.arch.heads % t == 0]
    cps = [fixed["cp"]] if "cp" in fixed else ([1, 2, 4, 8] if job.seq >= 8192 else [1])
    shards = [fixed["shard"]] if "shard" in fixed else (["none"] if one_process else list(lay.SHARDS))
    acs = [fixed["ac"]] if "ac" in fixed else list(lay.AC)
    out = []
    for tp, cp in itertools.product(tps, cps):
        if n % (tp * cp) or job.seq % cp:
            continue
        rest = n // (tp * cp)
        pps = [fixed["pp"]] if "pp" in fixed else [p for p in _divisors(rest) if p <= job.arch.layers]
        for pp in pps:
            if rest % pp or ("stages" in keep and len(keep["stages"]) != pp):
                continue
            dp = rest // pp
            if ("dp" in fixed and fixed["dp"] != dp) or job.global_batch % dp:
                continue
            per_replica = job.global_batch // dp
            mbs = [fixed["mb"]] if "mb" in fixed else [m for m in _divisors(per_replica) if m <= MAX_MB]
            stages = keep.get("stages") or lay.balanced_stages(job.arch.layers, pp)
            vpps = [fixed["vpp"]] if "vpp" in fixed else ([v for v in (1, 2, 4, 8) if not lay.vpp_misfits(stages, v)]
                                                          if pp > 1 else [1])
            for shard, mb, ac, vpp in itertools.product(shards, mbs, acs, vpps):
                if shard != "none" and dp * cp == 1 or shard == "hsdp" and job.nodes < 2:
                    continue
                if per_replica % mb or (vpp > 1 and lay.vpp_misfits(stages, vpp)):
                    continue
                if ("reshard" in keep and shard not in lay.GATHERED) or (
                        keep.get("ag_overlap") and shard not in ("zero1", "zero2")):
                    continue
                out.append(Layout(tp=tp, pp=pp, cp=cp, dp=dp, shard=shard, mb=mb, ac=ac, vpp=vpp, **keep))
    return out


def search(job: Job, fixed: dict | None = None, *, top: int = 10) -> list[Plan]:
    """Rank the layouts consistent with ``fixed``: the recommendation first, then the other fitting ones
    by predicted step time, up to ``top`` rows in all, then (when nothing fits) the least over-full ones.

    Raises:
        LayoutError: the fixed keys admit no layout at all (the message says which check failed).
        ValueError: no layout can be priced on this profile (the first reason).
    """
    fixed = dict(fixed or {})
    if all(k in fixed for k in ("tp", "pp", "cp", "dp", "shard", "mb", "ac")):
        return rank([evaluate(job, Layout(**fixed))], top=top)
    layouts = candidates(job, fixed)
    if not layouts:
        # Build the closest layout from the fixed keys to let check() name the broken rule.
        probe = Layout(**{"tp": 1, "pp": 1, "cp": 1, "shard": "none", "mb": 1, "ac": "none", "vpp": 1, **fixed,
                          "dp": fixed.get("dp", max(1, job.gpus // (fixed.get("tp", 1) * fixed.get("pp", 1)
                                                                    * fixed.get("cp", 1))))})
        lay.check(probe, job.arch, gpus=job.gpus, gpus_per_node=job.gpus_per_node, global_batch=job.global_batch,
                  seq=job.seq, nodes=job.nodes)
        raise lay.LayoutError(f"--layout {fixed}: no layout of {job.gpus} GPUs satisfies these keys; leave "
                              f"more keys to the search")
    cap = job.profile.memory_bytes
    plans = [Plan(layout=lo, memory=_memory(job, lo), time=None, capacity=cap) for lo in layouts]
    fitting = [p for p in plans if p.fits]
    pool = fitting or sorted(plans, key=lambda p: p.memory.total)[:top]
    timed, errors = [], []
    for p in pool:
        try:
            timed.append(_timed(job, p))
        except ValueError as exc:
            errors.append(str(exc))
    if not timed:
        raise ValueError(errors[0])
    return rank(distinct(timed), top=top)


def _priced(p: Plan) -> tuple:
    return (round(p.time.step_s, 12), round(p.memory.allocated), round(p.memory.reserved), round(p.memory.total))


def distinct(plans: list[Plan], names: dict[int, str] | None = None) -> list[Plan]:
    """One plan per pricing: layouts priced the same to the byte and the picosecond are one answer shown
    twice (ZeRO-3 and FSDP gather and shard alike below DeepSpeed's live-parameter cap; ZeRO-1 and ZeRO-2 where
    no gradient accumulation keeps gradients between micro-batches).  The FSDP layout is kept (what PyTorch
    users run), else the simplest (:func:`simplicity`); the others go into its notes, by their row names
    (``names``: by ``id(plan)``, the named strategies) or their layouts."""
    groups: dict[tuple, list[Plan]] = {}
    for p in plans:
        groups.setdefault(_priced(p), []).append(p)
    out = []
    for same in groups.values():
        keep = min(same, key=lambda p: (p.layout.shard != "fsdp", simplicity(p.layout)))
        others = [(names or {}).get(id(p)) or p.layout.label() for p in same if p is not keep]
        if others:
            keep.notes.append(f"priced the same as {', '.join(others)} (shown once)")
        out.append(keep)
    return out


def _gib(x: float) -> str:
    return f"{x / 2**30:.1f} GiB"


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.2f} s"


def rank(plans: list[Plan], *, top: int = 10) -> list[Plan]:
    """Order ``plans`` and set ``rank`` (1 = recommended; None = does not fit) and ``reason``.

    Fitting plans are ordered by predicted step time, except that the recommendation is the *simplest*
    plan within :data:`TIE_MARGIN` of the fastest (fewest parallel dimensions and features, then DDP before
    replicated before DataParallel); at most ``top`` of them, then those that do not fit.
    """
    ok = sorted((p for p in plans if p.fits), key=lambda p: p.time.step_s)
    flagged = sorted((p for p in plans if not p.fits), key=lambda p: p.memory.total)  # least over-full first
    if ok:
        best = ok[0]
        close = [p for p in ok if p.time.step_s <= best.time.step_s * (1 + TIE_MARGIN)]
        pick = min(close, key=lambda p: simplicity(p.layout))
        ok.remove(pick)
        ok = [pick, *ok][:top]
        pick.reason = (f"fastest predicted: {_ms(pick.time.step_s)} per step" if pick is best else
                       f"simplest within {TIE_MARGIN:.0%} of the fastest: {_ms(pick.time.step_s)} per step "
                       f"(the fastest, {best.layout.label()}: {_ms(best.time.step_s)})") + f"; {_where(pick)}"
        for p in ok[1:]:
            p.reason = _loser(p, pick)
    for i, p in enumerate(ok, 1):
        p.rank = i
    for p in flagged:
        p.rank = None
        p.reason = (f"{_ms(p.time.step_s)} per step, but does not fit: {_gib(p.memory.total)} > {_gib(p.capacity or 0)} "
                    f"(largest term: {max(p.memory.as_dict().items(), key=lambda kv: kv[1])[0]})")
    for p in ok + flagged:  # the rows :func:`distinct` folded into this one
        p.reason += "".join(f"; {n}" for n in p.notes if n.endswith("(shown once)"))
    return ok + flagged


HOST_WAIT = "waiting for the host (eager Python issuing the kernels; moves with the host's pace)"
"""How a reason names :attr:`~gpucomm.advisor.timing.StepTime.host_wait_s`: a step its host paces takes the
host's time, and on the lent H200 machines the host's own pace moved 2.62x between windows of 0.3 s with no
steal to show it (benchmarks/results/host-speed_h200x1_2026-12-04.txt) — the reason says so, so that a user can
prefer a layout the device paces (fewer, larger layers; no per-op checkpointing) where the time must hold."""


def _where(p: Plan) -> str:
    t = p.time
    parts = {"pipeline bubble": t.bubble_s, "tensor-parallel comm": t.tp_s, "data-parallel comm (exposed)":
             t.dp_exposed_s, "pipeline p2p": t.p2p_s, "context-parallel comm (exposed)": t.cp_exposed_s,
             "wrapper overhead": t.overhead_s, HOST_WAIT: t.host_wait_s}
    what, sec = max(parts.items(), key=lambda kv: kv[1])
    if sec < 0.005 * t.step_s:
        return f"compute {t.compute_s / t.step_s:.0%} of the step"
    return f"compute {t.compute_s / t.step_s:.0%} of the step, largest overhead {what} {sec / t.step_s:.0%}"


def _loser(p: Plan, best: Plan) -> str:
    slower = p.time.step_s / best.time.step_s - 1
    a, b = p.time, best.time
    diffs = {"compute (recomputation, smaller GEMMs)": a.compute_s - b.compute_s,
             "pipeline bubble": a.bubble_s - b.bubble_s, "tensor-parallel comm": a.tp_s - b.tp_s,
             "exposed data-parallel comm": a.dp_exposed_s - b.dp_exposed_s, "pipeline p2p": a.p2p_s - b.p2p_s,
             "exposed context-parallel comm": a.cp_exposed_s - b.cp_exposed_s,
             "wrapper overhead (host time, slowdown)": a.overhead_s - b.overhead_s,
             HOST_WAIT: a.host_wait_s - b.host_wait_s}
    what, delta = max(diffs.items(), key=lambda kv: kv[1])
    own = f"{_ms(a.step_s)} per step"
    if slower <= TIE_MARGIN:
        return f"{own}: within {TIE_MARGIN:.0%} of the recommendation, which is simpler"
    return f"{own}, {slower:.0%} slower than the recommendation: +{_ms(delta)} {what}"
