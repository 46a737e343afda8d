"""The collective spec table: each collective defined once, as data.

Everything that needs to know what a collective *is* reads this module: ``gpucomm.comm`` and
``gpucomm.dist`` (output shapes), ``gpucomm bench`` (buffer sizes, algbw, busbw) and ``gpucomm advise``
(bytes on the wire).  Nobody else dispatches on op-name strings to get these facts.

Sizes follow nccl-tests (``../shared/reference/collective-bench.md`` §1.1, ``doc/PERFORMANCE.md``):

* ``size`` is the nccl-tests "size" column: the larger of one participant's send and receive buffers,
  in bytes.  For all_gather that is the full output (n chunks), for reduce_scatter the full input,
  for scatter and gather the root's full buffer, for all_to_all the whole per-participant buffer.
* ``algbw = S / t`` with ``S = size`` for every collective in this table.
* ``busbw = algbw * busbw_factor(n)``: ``2(n-1)/n`` for all_reduce; ``(n-1)/n`` for all_gather,
  reduce_scatter, all_to_all, scatter and gather; ``1`` for broadcast, reduce and send_recv.

``n`` is the number of participants (devices in ``comm``, ranks' devices in ``dist``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "COLLECTIVES",
    "Collective",
    "CollectiveName",
    "Factor",
    "ReduceOp",
    "get",
    "names",
    "parse_op",
]


class CollectiveName(str, enum.Enum):
    """Names of the collectives, as they appear in records, CLI flags and JSON."""

    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    SCATTER = "scatter"
    GATHER = "gather"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"

    def __str__(self) -> str:
        return self.value


class ReduceOp(str, enum.Enum):
    """Reduction ops shared by every reducing collective (str values land in JSON and CLI flags).

    ``avg`` is the sum divided by n, computed in the tensor's dtype (for integers: floor division
    semantics are not offered; avg on integer tensors is rejected by the implementations).
    """

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PROD = "prod"

    def __str__(self) -> str:
        return self.value


_TORCH_ALIASES = {"product": "prod"}  # torch.distributed.ReduceOp.PRODUCT


def parse_op(op: object, arg: str = "op") -> ReduceOp:
    """Accept ``"sum"``/``"SUM"``/``ReduceOp.SUM`` (and torch.distributed.ReduceOp's names); clear errors."""
    if isinstance(op, ReduceOp):
        return op
    # torch.distributed.ReduceOp members (RedOpType) carry the name we want.
    name = op if isinstance(op, str) else getattr(op, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{arg}: expected a str such as 'sum', but got {type(op).__name__} {op!r}")
    try:
        return ReduceOp(_TORCH_ALIASES.get(name.lower(), name.lower()))
    except ValueError:
        valid = ", ".join(repr(o.value) for o in ReduceOp)
        raise ValueError(f"{arg}: unknown reduction op {op!r}; expected one of {valid}") from None


class Factor(str, enum.Enum):
    """The busbw correction factor, by the shape of the traffic (nccl-tests ``*GetBw``)."""

    ONE = "1"
    """Bound by one link: broadcast, reduce, send_recv."""
    N_MINUS_1_OVER_N = "(n-1)/n"
    """Each participant moves (n-1)/n of S: all_gather, reduce_scatter, all_to_all, scatter, gather."""
    TWO_N_MINUS_1_OVER_N = "2(n-1)/n"
    """A reduce-scatter followed by an all-gather: all_reduce."""

    def __call__(self, n: int) -> float:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"busbw factor: expected a participant count n >= 1, but got n={n!r}")
        if self is Factor.ONE:
            return 1.0
        if self is Factor.N_MINUS_1_OVER_N:
            return (n - 1) / n
        return 2 * (n - 1) / n


# Where a participant's buffers sit relative to ``size`` (the larger buffer):
#   "full"  — the buffer is ``size`` bytes
#   "chunk" — the buffer is ``size / n`` bytes (one of n equal chunks)
#   "root"  — ``size`` bytes on the root, nothing (no buffer) elsewhere
_FULL, _CHUNK, _ROOT = "full", "chunk", "root"


@dataclass(frozen=True, slots=True, kw_only=True)
class Collective:
    """One collective, as data.

    Shapes are described for tensors whose leading dimension (``dim``) is the one that is split or
    concatenated; all other dimensions pass through unchanged.
    """

    name: CollectiveName
    """The collective's name."""
    has_root: bool
    """True when one participant is the source or destination (broadcast, reduce, scatter, gather)."""
    reduces: bool
    """True when the collective combines values with a reduction op (sum, avg, max, min, prod)."""
    factor: Factor
    """The busbw factor as a function of n."""
    input_buffer: str
    """One participant's input buffer relative to ``size``: "full", "chunk" or "root"."""
    output_buffer: str
    """One participant's output buffer relative to ``size``: "full", "chunk" or "root"."""
    summary: str
    """One line: what every participant holds afterwards."""

    # ----- bytes -----------------------------------------------------------------------------------
    def algbw_bytes(self, size: int) -> int:
        """The bytes S that algbw divides by the time: the nccl-tests size column, for every collective."""
        return _check_size(size)

    def busbw_factor(self, n: int) -> float:
        """nccl-tests' bus-bandwidth factor for n participants."""
        return self.factor(n)

    def algbw(self, size: int, seconds: float) -> float:
        """Algorithm bandwidth in GB/s (10^9 bytes/s): S / t."""
        if not seconds > 0:
            raise ValueError(f"algbw: expected a positive time in seconds, but got {seconds!r}")
        return self.algbw_bytes(size) / seconds / 1e9

    def busbw(self, size: int, seconds: float, n: int) -> float:
        """Bus bandwidth in GB/s: algbw × busbw_factor(n)."""
        return self.algbw(size, seconds) * self.busbw_factor(n)

    def input_nbytes(self, size: int, n: int, *, is_root: bool = True) -> int:
        """Bytes in one participant's input buffer for a run of ``size`` (0 where it has none)."""
        return _buffer_nbytes(self.input_buffer, _check_size(size), _check_n(n), is_root)

    def output_nbytes(self, size: int, n: int, *, is_root: bool = True) -> int:
        """Bytes in one participant's output buffer for a run of ``size`` (0 where it has none)."""
        return _buffer_nbytes(self.output_buffer, _check_size(size), _check_n(n), is_root)

    def wire_bytes(self, size: int, n: int) -> float:
        """Bytes each participant must send on an ideal flat fabric: S × busbw_factor(n).

        This is the quantity the bus bandwidth is a rate of, and what alpha-beta cost models charge
        the link bandwidth for.
        """
        return self.algbw_bytes(size) * self.busbw_factor(n)

    # ----- shapes ----------------------------------------------------------------------------------
    def output_shape(self, input_shape: Sequence[int], n: int, dim: int = 0) -> tuple[int, ...]:
        """The output shape on one participant (the root, for rooted collectives) given its input shape.

        * all_gather and gather concatenate n inputs along ``dim``: ``dim`` grows n times.
        * reduce_scatter and scatter split the input into n equal chunks along ``dim``.
        * every other collective keeps the shape (all_to_all exchanges equal chunks of one buffer).

        Raises ``ValueError`` when ``dim`` is out of range or a split does not divide evenly.
        """
        shape = tuple(int(s) for s in input_shape)
        n = _check_n(n)
        grows = self.input_buffer == _CHUNK
        splits = self.output_buffer == _CHUNK
        if not (grows or splits):
            return shape
        d = _check_dim(dim, shape, self.name)
        if grows:
            return shape[:d] + (shape[d] * n,) + shape[d + 1:]
        if shape[d] % n:
            raise ValueError(
                f"{self.name}: the input's dim {d} has size {shape[d]}, which does not divide into "
                f"n={n} equal chunks; pad or trim it to a multiple of {n}"
            )
        return shape[:d] + (shape[d] // n,) + shape[d + 1:]


def _check_size(size: int) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"expected size to be a non-negative number of bytes, but got {size!r}")
    return size


def _check_n(n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"expected a participant count n >= 1, but got n={n!r}")
    return n


def _check_dim(dim: int, shape: tuple[int, ...], name: str) -> int:
    ndim = len(shape)
    if ndim == 0:
        raise ValueError(f"{name}: a 0-dim tensor cannot be split or concatenated; view it as [1] first")
    if not -ndim <= dim < ndim:
        raise ValueError(f"{name}: dim={dim} is out of range for a {ndim}-dim tensor of shape {list(shape)}; "
                         f"expected {-ndim} <= dim < {ndim}")
    return dim % ndim


def _buffer_nbytes(kind: str, size: int, n: int, is_root: bool) -> int:
    if kind == _FULL:
        return size
    if kind == _CHUNK:
        return size // n
    return size if is_root else 0


def _spec(name: CollectiveName, *, root: bool, reduces: bool, factor: Factor, inp: str, out: str,
          summary: str) -> Collective:
    return Collective(name=name, has_root=root, reduces=reduces, factor=factor, input_buffer=inp,
                      output_buffer=out, summary=summary)


_N = CollectiveName
_F = Factor
COLLECTIVES: dict[CollectiveName, Collective] = {
    c.name: c
    for c in (
        _spec(_N.BROADCAST, root=True, reduces=False, factor=_F.ONE, inp=_ROOT, out=_FULL,
              summary="every participant holds a full copy of the root's tensor"),
        _spec(_N.REDUCE, root=True, reduces=True, factor=_F.ONE, inp=_FULL, out=_ROOT,
              summary="the root holds the elementwise reduction of all inputs"),
        _spec(_N.ALL_REDUCE, root=False, reduces=True, factor=_F.TWO_N_MINUS_1_OVER_N, inp=_FULL, out=_FULL,
              summary="every participant holds the elementwise reduction of all inputs"),
        _spec(_N.ALL_GATHER, root=False, reduces=False, factor=_F.N_MINUS_1_OVER_N, inp=_CHUNK, out=_FULL,
              summary="every participant holds all inputs concatenated in participant order"),
        _spec(_N.REDUCE_SCATTER, root=False, reduces=True, factor=_F.N_MINUS_1_OVER_N, inp=_FULL,
              out=_CHUNK, summary="participant i holds chunk i of the elementwise reduction"),
        _spec(_N.SCATTER, root=True, reduces=False, factor=_F.N_MINUS_1_OVER_N, inp=_ROOT, out=_CHUNK,
              summary="participant i holds chunk i of the root's tensor"),
        _spec(_N.GATHER, root=True, reduces=False, factor=_F.N_MINUS_1_OVER_N, inp=_CHUNK, out=_ROOT,
              summary="the root holds all inputs concatenated in participant order"),
        _spec(_N.ALL_TO_ALL, root=False, reduces=False, factor=_F.N_MINUS_1_OVER_N, inp=_FULL, out=_FULL,
              summary="participant j holds chunk j of every input, in participant order"),
        _spec(_N.SEND_RECV, root=False, reduces=False, factor=_F.ONE, inp=_FULL, out=_FULL,
              summary="participant i holds the input of participant i-1 (mod n)"),
    )
}


def get(name: str | CollectiveName) -> Collective:
    """Look a collective up by name; a clear ``ValueError`` lists the valid names otherwise."""
    try:
        return COLLECTIVES[CollectiveName(name)]
    except ValueError:
        valid = ", ".join(c.value for c in CollectiveName)
        raise ValueError(f"unknown collective {name!r}; expected one of: {valid}") from None


def names() -> list[str]:
    """Every collective's name, in table order."""
    return [c.value for c in COLLECTIVES]

