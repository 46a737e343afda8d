"""A parallel layout, and the two CLI strings that describe a job: ``--layout`` and ``--arch``.

A layout splits ``tp x pp x cp x dp`` GPUs (Megatron's order, tensor parallel innermost so that it stays
inside a machine, pipeline outermost): tensor parallel ``tp`` over the heads and the MLP, pipeline ``pp``
over the layers (``vpp`` virtual stages per rank for the interleaved 1F1B schedule), context parallel
``cp`` over the sequence, data parallel ``dp`` over the batch with a sharding scheme (``none``; ZeRO
stages ``zero1``/``zero2``/``zero3``; ``fsdp`` = zero3 with per-layer units; ``hsdp`` = fsdp inside a
machine, replicated across machines), a micro-batch ``mb`` (sequences per model replica per forward) and
activation checkpointing ``ac`` (``none``; ``selective``: Megatron's, Korthikanti et al. 2022, the
attention core recomputed; ``op``: torchtitan's per-op selective policy, every second matmul recomputed;
``full``).  Gradient accumulation follows:
``global_batch / (dp x mb)`` micro-batches per step.

``--layout tp=8,pp=4,mb=1`` fixes those keys and leaves the others to the search (``ac=auto`` too).
Every check here raises :class:`LayoutError` with one line naming the key, the value, the constraint and
a fix; the CLI turns it into exit status 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucomm import models

__all__ = ["AC", "INT_KEYS", "LAYOUT_KEYS", "SHARDS", "Layout", "LayoutError", "check", "parse_arch",
           "parse_layout"]

SHARDS = ("none", "zero1", "zero2", "zero3", "fsdp", "hsdp")
AC = ("none", "selective", "op", "full")
INT_KEYS = ("tp", "pp", "cp", "dp", "mb", "vpp")
LAYOUT_KEYS = ("tp", "pp", "cp", "dp", "shard", "mb", "ac", "vpp")
_ARCH_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "ffn_kind", "vocab", "seq", "tied")


class LayoutError(ValueError):
    """A layout or architecture string, or a layout that cannot run this job (one line, with the fix)."""


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

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    def as_dict(self) -> dict[str, Any]:
        """Every key, in :data:`LAYOUT_KEYS` order (what records and ``--json`` carry)."""
        return {k: getattr(self, k) for k in LAYOUT_KEYS}

    def label(self) -> str:
        """Short form: the keys that differ from 1/"none", e.g. "tp8 pp4 dp32 mb1 ac=full"."""
        parts = [f"{k}{getattr(self, k)}" for k in ("tp", "pp", "cp", "dp") if getattr(self, k) != 1 or k == "dp"]
        if self.vpp != 1:
            parts.append(f"vpp{self.vpp}")
        if self.shard != "none":
            parts.append(self.shard)
        parts.append(f"mb{self.mb}")
        if self.ac != "none":
            parts.append(f"ac={self.ac}")
        return " ".join(parts)


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
            if value not in SHARDS:
                raise LayoutError(f"--layout shard={value!r}: expected one of {'|'.join(SHARDS)}")
            out[key] = value
        elif value != "auto":  # ac
            if value not in AC:
                raise LayoutError(f"--layout ac={value!r}: expected one of {'|'.join(AC)}|auto")
            out[key] = value
    return out


def parse_arch(text: str) -> models.Architecture:
    """An :class:`~gpucomm.models.Architecture` from ``layers=..,hidden=..,heads=..[,kv_heads=..,ffn=..,
    ffn_kind=gelu-4h|swiglu,vocab=..,seq=..,tied=0|1]``.

    Defaults: kv_heads = heads; ffn_kind "gelu-4h" with ffn = 4 hidden unless ``ffn`` is given and
    ``ffn_kind`` is not (then "swiglu", the kind whose width is not 4h); vocab 50304; seq 2048; untied.
    """
    raw = _pairs(text, "--arch", _ARCH_KEYS)
    missing = [k for k in ("layers", "hidden", "heads") if k not in raw]
    if missing:
        raise LayoutError(f"--arch: missing {', '.join(missing)}; give at least layers=..,hidden=..,heads=..")
    ints = {k: _int("--arch", k, v) for k, v in raw.items() if k not in ("ffn_kind", "tied")}
    h = ints["hidden"]
    kind = raw.get("ffn_kind") or ("swiglu" if "ffn" in ints else "gelu-4h")
    if kind not in models.FFN_KINDS:
        raise LayoutError(f"--arch ffn_kind={kind!r}: expected one of {'|'.join(models.FFN_KINDS)}")
    tied = raw.get("tied", "0")
    if tied not in ("0", "1"):
        raise LayoutError(f"--arch tied={tied!r}: expected 0 or 1")
    name = f"arch:L{ints['layers']}-h{h}-a{ints['heads']}"
    try:
        return models.Architecture(
            name=name, layers=ints["layers"], hidden=h, heads=ints["heads"],
            kv_heads=ints.get("kv_heads", ints["heads"]), ffn_hidden=ints.get("ffn", 4 * h), ffn_kind=kind,
            vocab=ints.get("vocab", 50304), seq=ints.get("seq", 2048), tied_embeddings=tied == "1",
            learned_positions=False, biases=kind == "gelu-4h", source="--arch")
    except ValueError as exc:
        raise LayoutError(f"--arch: {exc}") from None


def check(layout: Layout, arch: models.Architecture, *, gpus: int, gpus_per_node: int, global_batch: int,
          seq: int, nodes: int = 1) -> None:
    """Raise :class:`LayoutError` unless ``layout`` can run this job (the first broken rule, with a fix)."""
    L = layout
    if L.shard not in SHARDS:
        raise LayoutError(f"--layout shard={L.shard!r}: expected one of {'|'.join(SHARDS)}")
    if L.ac not in AC:
        raise LayoutError(f"--layout ac={L.ac!r}: expected one of {'|'.join(AC)}")
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
    if L.vpp > 1 and (L.pp == 1 or arch.layers % (L.pp * L.vpp)):
        raise LayoutError(f"--layout vpp={L.vpp}: needs pp > 1 and pp*vpp dividing the {arch.layers} layers; "
                          f"use vpp=1 or another pp")
    if seq % L.cp:
        raise LayoutError(f"--layout cp={L.cp}: must divide the sequence length {seq}; use a divisor")
    if L.shard == "hsdp" and nodes < 2:
        raise LayoutError("--layout shard=hsdp: replicates across machines, but there is one; use fsdp")
    if L.shard != "none" and L.dp * L.cp == 1:
        raise LayoutError(f"--layout shard={L.shard}: needs dp*cp > 1 GPUs to shard over; use shard=none")
    if global_batch % L.dp:
        raise LayoutError(f"--global-batch {global_batch}: must divide into dp={L.dp} replicas; "
                          f"use a multiple of {L.dp}")
    per_replica = global_batch // L.dp
    if per_replica % L.mb:
        raise LayoutError(f"--layout mb={L.mb}: must divide the per-replica batch {per_replica} "
                          f"(= {global_batch}/{L.dp}); use a divisor of {per_replica}")
