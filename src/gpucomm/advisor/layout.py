"""A parallel layout, and the two CLI strings that describe a job: ``--layout`` and ``--arch``.

A layout splits ``tp x pp x cp x dp`` GPUs (Megatron's order, tensor parallel innermost so that it stays
inside a machine, pipeline outermost) and says how each dimension runs.  Every key, its default and where the
mechanism comes from:

* ``tp``: tensor parallel over the heads and the MLP, with sequence parallel (Megatron-LM).
  ``tp_overlap=0|1`` (default 0, the default of Megatron-Core's ``--tp-comm-overlap`` and of torchtitan's
  ``enable_async_tensor_parallel``): 1 overlaps each sequence-parallel all-gather and reduce-scatter with the
  GEMM it is split against (Megatron-Core's userbuffer overlap through Transformer Engine; PyTorch's async
  TP, ``torch.distributed._symmetric_memory``'s fused all-gather-matmul and matmul-reduce-scatter).
* ``pp``: pipeline stages over the layers, 1F1B schedule.  ``stages=7+8+8+7`` gives each stage's layer
  count (it must sum to the layers; default: as even as possible, the first ``L mod pp`` stages one layer
  more); the first stage also holds the embedding, the last the final norm, head and loss (Megatron-LM's
  ``--decoder-first/last-pipeline-num-layers``; the Llama 3 paper, Sec. 3.3.2, gave its first and last
  stages one layer less).  ``vpp``: virtual stages per rank for the interleaved schedule; it must divide
  every stage's layer count (each rank holds ``vpp`` chunks of ``layers / vpp`` layers), where the first
  stage may count its embedding and the last its head and loss as one more chunk's worth (Megatron-Core's
  ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``; Llama 3 405B ran 16
  stages of 8 one-layer chunks, its first chunk the embedding alone and its last the head and loss alone,
  Sec. 3.3.2: ``stages=7+8+...+8+7,vpp=8``).
* ``cp``: context parallel over the sequence (ring attention).
* ``dp``: data parallel over the batch, with a sharding scheme ``shard``: ``none``; ZeRO stages
  ``zero1``/``zero2``/``zero3``; ``fsdp`` = zero3 with per-layer units; ``hsdp`` = fsdp inside a machine,
  replicated across machines.

  - ``reshard=fwd|bwd|step`` (zero3/fsdp/hsdp; default ``fwd``, ``step`` when pipelined): when gathered
    weights are freed.  ``fwd``
    frees them after each unit's forward and gathers again for its backward, every micro-batch (FSDP2's
    ``reshard_after_forward=True``, its default; DeepSpeed ZeRO-3); ``bwd`` keeps them from forward to
    backward, one gather per micro-batch (``reshard_after_forward=False``; FSDP1's ``SHARD_GRAD_OP``);
    ``step`` keeps the weights and the unsharded gradients across the micro-batches of a step: one gather
    and one reduce-scatter per step (``set_reshard_after_backward(False)`` with
    ``set_requires_gradient_sync(False)`` until the last micro-batch — what ``torch.distributed.pipelining``
    does to FSDP stages, ``stage.py``, hence the default under pipelining).
  - ``ag_overlap=0|1`` (zero1/zero2; default 0, as Megatron-Core's ``--overlap-param-gather``): 1 overlaps
    the all-gather of the updated weights with the next step's forward.
  - ``wrapper``: who runs data parallel.  ``ddp`` (the default when dp x cp > 1): one process per GPU — torch
    DDP's (or Megatron's) bucketed all-reduce overlapped with backward, or the sharded wrapper ``shard``
    names.  ``none`` (the default for one replica): a plain step, no wrapper.  ``replicated`` (gpucomm's
    :mod:`gpucomm.parallel`) and ``dataparallel`` (``torch.nn.DataParallel``): one process driving every GPU
    of one machine (shard=none, tp = pp = cp = 1).

* ``mb``: micro-batch, sequences per model replica per forward; gradient accumulation follows:
  ``global_batch / (dp x mb)`` micro-batches per step.
* ``ac``: activation checkpointing — ``none``; ``selective``: Megatron's, Korthikanti et al. 2022, the
  attention core recomputed; ``op``: torchtitan's per-op selective policy, every second matmul recomputed;
  ``full``.

``--layout tp=8,pp=4,mb=1`` fixes those keys and leaves the others to the search (``ac=auto`` too).  The
named strategies ``gpucomm train`` measures are presets of a layout (:data:`STRATEGIES`).  Every check here
raises :class:`LayoutError` with one line naming the key, the value, the constraint and a fix; the CLI turns it
into exit status 2.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gpucomm import models

__all__ = ["AC", "INT_KEYS", "LAYOUT_KEYS", "RESHARD", "SHARDS", "STRATEGIES", "WRAPPERS", "Layout", "LayoutError",
           "balanced_stages", "check", "vpp_misfits", "parse_arch", "parse_layout", "preset"]

SHARDS = ("none", "zero1", "zero2", "zero3", "fsdp", "hsdp")
GATHERED = ("zero3", "fsdp", "hsdp")
"""Schemes that shard the weights and gather them per unit."""
AC = ("none", "selective", "op", "full")
RESHARD = ("fwd", "bwd", "step")
WRAPPERS = ("none", "ddp", "replicated", "dataparallel")
ONE_PROCESS = ("replicated", "dataparallel")
"""Wrappers that drive every GPU of a machine from one process."""
INT_KEYS = ("tp", "pp", "cp", "dp", "mb", "vpp")
FLAG_KEYS = ("tp_overlap", "ag_overlap")
LAYOUT_KEYS = ("tp", "pp", "cp", "dp", "shard", "mb", "ac", "vpp", "stages", "reshard", "tp_overlap",
               "ag_overlap", "wrapper")
_ARCH_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "ffn_kind", "vocab", "seq", "tied", "dropout")

STRATEGIES: dict[str, dict[str, Any]] = {
    "single": {"wrapper": "none"},
    "dp": {"wrapper": "dataparallel"},
    "replicated": {"wrapper": "replicated"},
    "ddp": {"wrapper": "ddp"},
    "zero1": {"shard": "zero1"},
    "zero2": {"shard": "zero2"},
    "zero3": {"shard": "zero3"},
    "fsdp": {"shard": "fsdp"},
}
"""The named strategies of ``gpucomm train`` as layout keys: data parallel over every GPU, one micro-batch of
``global_batch / GPUs`` sequences per GPU (no accumulation), no checkpointing (:func:`preset`)."""


class LayoutError(ValueError):
    """A layout or architecture string, or a layout that cannot run this job (one line, with the fix)."""


def vpp_misfits(stages: tuple[int, ...], vpp: int) -> list[int]:
    """Stage layer counts that ``vpp`` virtual stages cannot split (module docstring, ``vpp``)."""
    last = len(stages) - 1
    return [n for r, n in enumerate(stages)
            if n % vpp and not ((r == 0 or r == last) and (n + 1) % vpp == 0)]


@functools.lru_cache(maxsize=4096)
def balanced_stages(layers: int, pp: int) -> tuple[int, ...]:
    """``layers`` over ``pp`` stages as evenly as possible, the first ``layers mod pp`` stages one more."""
    q, r = divmod(layers, pp)
    return tuple(q + 1 if i < r else q for i in range(pp))


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """One way to run the job (see the module docstring)."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 1
    shard: str = "none"
    mb: int = 1
    ac: str = "none"
    vpp: int = 1
    stages: tuple[int, ...] | None = None
    """Layers per pipeline stage; None: :func:`balanced_stages`."""
    reshard: str = "auto"
    """"auto": ``step`` when pipelined, else ``fwd`` (:attr:`regather`)."""
    tp_overlap: bool = False
    ag_overlap: bool = False
    wrapper: str = "auto"
    """"auto": ``ddp`` when dp x cp > 1, else ``none`` (:attr:`wrap`)."""

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def wrap(self) -> str:
        """The wrapper, "auto" resolved."""
        if self.wrapper != "auto":
            return self.wrapper
        return "ddp" if self.dp * self.cp > 1 else "none"

    @property
    def regather(self) -> str:
        """The resharding, "auto" resolved (module docstring)."""
        if self.reshard != "auto":
            return self.reshard
        return "step" if self.pp > 1 else "fwd"

    @property
    def one_process(self) -> bool:
        return self.wrap in ONE_PROCESS

    def stage_layers(self, layers: int) -> tuple[int, ...]:
        """Layers of each pipeline stage, first to last."""
        return self.stages if self.stages is not None else balanced_stages(layers, self.pp)

    def as_dict(self) -> dict[str, Any]:
        """Every key, in :data:`LAYOUT_KEYS` order (what records and ``--json`` carry); the wrapper resolved."""
        d = {k: getattr(self, k) for k in LAYOUT_KEYS}
        d["stages"] = None if self.stages is None else list(self.stages)
        d["wrapper"] = self.wrap
        d["reshard"] = self.regather if self.shard in GATHERED else None
        return d

    def label(self) -> str:
        """Short form: the keys that differ from their defaults, e.g. "tp8 pp4 dp32 mb1 ac=full"."""
        parts = [f"{k}{getattr(self, k)}" for k in ("tp", "pp", "cp", "dp") if getattr(self, k) != 1 or k == "dp"]
        if self.stages is not None:
            parts.append("stages=" + "+".join(map(str, self.stages)))
        if self.vpp != 1:
            parts.append(f"vpp{self.vpp}")
        if self.shard != "none":
            parts.append(self.shard + (f" reshard={self.reshard}" if self.reshard != "auto" else ""))
        if self.wrap in ONE_PROCESS:
            parts.append(self.wrap)
        parts.append(f"mb{self.mb}")
        if self.ac != "none":
            parts.append(f"ac={self.ac}")
        parts += [k.replace("_", "-") for k in FLAG_KEYS if getattr(self, k)]
        return " ".join(parts)


def preset(strategy: str, gpus: int, global_batch: int) -> Layout:
    """The layout of a named strategy (:data:`STRATEGIES`) on ``gpus`` GPUs.

    Raises:
        LayoutError: unknown strategy, or a batch that does not split over the GPUs.
    """
    keys = STRATEGIES.get(strategy)
    if keys is None:
        raise LayoutError(f"--strategies {strategy!r}: expected a comma list of {', '.join(STRATEGIES)}")
    if global_batch % gpus:
        raise LayoutError(f"--global-batch {global_batch}: must divide over the {gpus} GPUs (--nodes x --gpus); "
                          f"use a multiple of {gpus}")
    return Layout(dp=gpus, mb=global_batch // gpus, **keys)


def _pairs(text: str, flag: str, keys: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        key, value = key.strip().replace("-", "_"), value.strip()
        if not eq or not value:
            raise LayoutError(f"{flag} {item!r}: expected key=value; e.g. {flag} {keys[0]}=8")
        if key not in keys:
            raise LayoutError(f"{flag} key {key!r}: unknown; known keys are {', '.join(keys)}")
        if key in out:
            raise LayoutError(f"{flag} key {key!r} given twice; give each key once")
        out[key] = value
    return out


def _int(flag: str, key: str, value: str) -> int:
    try:
        v = int(value)
    except ValueError:
        v = 0
    if v < 1 or str(v) != value.lstrip("+"):
        raise LayoutError(f"{flag} {key}={value!r}: expected an integer >= 1; e.g. {key}=2")
    return v


def _stages(value: str) -> tuple[int, ...]:
    parts = value.split("+")
    out = tuple(_int("--layout", "stages", p.strip()) if p.strip() else 0 for p in parts)
    if any(n < 1 for n in out):
        raise LayoutError(f"--layout stages={value!r}: expected layer counts >= 1 joined by '+'; "
                          f"e.g. stages=7+8+8+7")
    return out


def _choice(key: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise LayoutError(f"--layout {key}={value!r}: expected one of {'|'.join(choices)}")
    return value


def parse_layout(text: str | None) -> dict[str, Any]:
    """The keys a ``--layout`` string fixes, typed; keys left out (and ``ac=auto``) are absent (searched)."""
    if not text:
        return {}
    raw = _pairs(text, "--layout", LAYOUT_KEYS)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in INT_KEYS:
            out[key] = _int("--layout", key, value)
        elif key == "shard":
            out[key] = _choice(key, value, SHARDS)
        elif key == "reshard":
            out[key] = _choice(key, value, RESHARD)
        elif key == "wrapper":
            out[key] = _choice(key, value, WRAPPERS)
        elif key in FLAG_KEYS:
            out[key] = _choice(key, value, ("0", "1")) == "1"
        elif key == "stages":
            out[key] = _stages(value)
        elif value != "auto":  # ac
            out[key] = _choice(key, value, (*AC, "auto"))
    return out


def parse_arch(text: str) -> models.Architecture:
    """An :class:`~gpucomm.models.Architecture` from ``layers=..,hidden=..,heads=..[,kv_heads=..,ffn=..,
    ffn_kind=gelu-4h|swiglu,vocab=..,seq=..,tied=0|1,dropout=0|1]``.

    Defaults: kv_heads = heads; ffn_kind "gelu-4h" with ffn = 4 hidden unless ``ffn`` is given and
    ``ffn_kind`` is not (then "swiglu", the kind whose width is not 4h); vocab 50304; seq 2048; untied;
    dropout for gelu-4h (Megatron's GPT trains with it), none for swiglu.
    """
    raw = _pairs(text, "--arch", _ARCH_KEYS)
    missing = [k for k in ("layers", "hidden", "heads") if k not in raw]
    if missing:
        raise LayoutError(f"--arch: missing {', '.join(missing)}; give at least layers=..,hidden=..,heads=..")
    ints = {k: _int("--arch", k, v) for k, v in raw.items() if k not in ("ffn_kind", "tied", "dropout")}
    h = ints["hidden"]
    kind = raw.get("ffn_kind") or ("swiglu" if "ffn" in ints else "gelu-4h")
    if kind not in models.FFN_KINDS:
        raise LayoutError(f"--arch ffn_kind={kind!r}: expected one of {'|'.join(models.FFN_KINDS)}")
    tied = raw.get("tied", "0")
    if tied not in ("0", "1"):
        raise LayoutError(f"--arch tied={tied!r}: expected 0 or 1")
    dropout = raw.get("dropout", "1" if kind == "gelu-4h" else "0")
    if dropout not in ("0", "1"):
        raise LayoutError(f"--arch dropout={dropout!r}: expected 0 or 1")
    name = f"arch:L{ints['layers']}-h{h}-a{ints['heads']}"
    try:
        return models.Architecture(
            name=name, layers=ints["layers"], hidden=h, heads=ints["heads"],
            kv_heads=ints.get("kv_heads", ints["heads"]), ffn_hidden=ints.get("ffn", 4 * h), ffn_kind=kind,
            vocab=ints.get("vocab", 50304), seq=ints.get("seq", 2048), tied_embeddings=tied == "1",
            learned_positions=False, biases=kind == "gelu-4h", dropout=dropout == "1", source="--arch")
    except ValueError as exc:
        raise LayoutError(f"--arch: {exc}") from None


def check(layout: Layout, arch: models.Architecture, *, gpus: int, gpus_per_node: int, global_batch: int,
          seq: int, nodes: int = 1) -> None:
    """Raise :class:`LayoutError` unless ``layout`` can run this job (the first broken rule, with a fix)."""
    L = layout
    _choice("shard", L.shard, SHARDS)
    _choice("ac", L.ac, AC)
    if L.reshard != "auto":
        _choice("reshard", L.reshard, RESHARD)
    if L.wrapper != "auto":
        _choice("wrapper", L.wrapper, WRAPPERS)
    if arch.heads % L.tp:
        raise LayoutError(f"--layout tp={L.tp}: must divide the {arch.heads} attention heads; "
                          f"use a divisor of {arch.heads}")
    if L.tp > gpus_per_node:
        raise LayoutError(f"--layout tp={L.tp}: exceeds the {gpus_per_node} GPUs of one machine (tensor "
                          f"parallel talks every layer); use tp <= {gpus_per_node}")
    if L.gpus != gpus:
        raise LayoutError(f"--layout dp*tp*pp*cp = {L.dp}*{L.tp}*{L.pp}*{L.cp} = {L.gpus}: must equal the "
                          f"{gpus} GPUs (--nodes x --gpus); change dp or the GPU count")
    if L.pp > arch.layers:
        raise LayoutError(f"--layout pp={L.pp}: more stages than the {arch.layers} layers; use pp <= "
                          f"{arch.layers}")
    if L.stages is not None:
        if len(L.stages) != L.pp:
            raise LayoutError(f"--layout stages={'+'.join(map(str, L.stages))}: {len(L.stages)} stages, but "
                              f"pp={L.pp}; give one layer count per stage")
        if sum(L.stages) != arch.layers:
            raise LayoutError(f"--layout stages={'+'.join(map(str, L.stages))}: sums to {sum(L.stages)}, but the "
                              f"model has {arch.layers} layers; make the counts sum to {arch.layers}")
    if L.vpp > 1:
        if L.pp == 1:
            raise LayoutError(f"--layout vpp={L.vpp}: virtual stages need pp > 1; use vpp=1 or pp > 1")
        bad = vpp_misfits(L.stage_layers(arch.layers), L.vpp)
        if bad:
            raise LayoutError(f"--layout vpp={L.vpp}: must divide every stage's layer count "
                              f"({'+'.join(map(str, L.stage_layers(arch.layers)))}), but {bad[0]} is not a "
                              f"multiple; use a vpp dividing each stage, or give stages=")
    if seq % L.cp:
        raise LayoutError(f"--layout cp={L.cp}: must divide the sequence length {seq}; use a divisor")
    if L.shard == "hsdp" and nodes < 2:
        raise LayoutError("--layout shard=hsdp: replicates across machines, but there is one; use fsdp")
    if L.shard != "none" and L.dp * L.cp == 1:
        raise LayoutError(f"--layout shard={L.shard}: needs dp*cp > 1 GPUs to shard over; use shard=none")
    if L.reshard != "auto" and L.shard not in GATHERED:
        raise LayoutError(f"--layout reshard={L.reshard}: applies to weight-sharding schemes "
                          f"({'|'.join(GATHERED)}), not shard={L.shard}; drop reshard")
    if L.ag_overlap and L.shard not in ("zero1", "zero2"):
        raise LayoutError(f"--layout ag_overlap=1: overlaps zero1/zero2's weight all-gather, but shard={L.shard}; "
                          f"drop ag_overlap")
    if L.tp_overlap and L.tp == 1:
        raise LayoutError("--layout tp_overlap=1: needs tp > 1 (there is no tensor-parallel communication); "
                          "drop tp_overlap")
    wrap = L.wrap
    if wrap == "none" and L.dp * L.cp > 1:
        raise LayoutError(f"--layout wrapper=none: dp*cp = {L.dp * L.cp} replicas need a data-parallel wrapper; "
                          f"use wrapper=ddp, or dp=1")
    if wrap in ONE_PROCESS:
        if L.shard != "none" or L.tp * L.pp * L.cp != 1:
            raise LayoutError(f"--layout wrapper={wrap}: one process replicating the model over GPUs takes "
                              f"shard=none and tp=pp=cp=1; use wrapper=ddp for this layout")
        if nodes > 1:
            raise LayoutError(f"--layout wrapper={wrap}: one process drives the GPUs of one machine, but there "
                              f"are {nodes} machines; use wrapper=ddp")
    if global_batch % L.dp:
        raise LayoutError(f"--global-batch {global_batch}: must divide into dp={L.dp} replicas; "
                          f"use a multiple of {L.dp}")
    per_replica = global_batch // L.dp
    if per_replica % L.mb:
        raise LayoutError(f"--layout mb={L.mb}: must divide the per-replica batch {per_replica} "
                          f"(= {global_batch}/{L.dp}); use a divisor of {per_replica}")
