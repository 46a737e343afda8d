"""What a collective *is*, as data: the :class:`Collective` row type and the vocabulary its rows share.

A row (one file per collective in this package, nccl-tests style: ``src/<coll>.cu`` fills four hooks
of one ``struct testColl``) holds every op-specific fact:

* **bytes** — the nccl-tests ``size`` column (``../shared`` reference ``collective-bench.md`` §1.1):
  the larger of one participant's send and receive buffers; ``algbw = S / t`` with ``S = size``;
  ``busbw = algbw × factor(n)``.
* **cost** — :meth:`Collective.ring_steps` and :meth:`Collective.wire_bytes`, the alpha-beta terms
  of a ring (or pipelined chain): ``t ≈ ring_steps(n)·α + wire_bytes(size, n)/β``.
* **buffers** — each participant's input and output for a placement ("in-place" outputs alias the
  input or a chunk of it), built with an allocator the caller passes in.
* **expected result** — what participant q holds afterwards, from the inputs' formula alone.
* **calls** — how torch.cuda.comm, gpucomm.comm, torch.distributed, gpucomm.dist and a
  Communicator perform it (:class:`Calls`); None where a library has no such call, with the reason.

Nothing here imports torch: the library a call runs on is passed in (``row.calls.communicator(comm,
args)``), tensors arrive through the allocator, so ``gpucomm --help`` and the cost model stay light.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = [
    "BUFFER",
    "CHUNK",
    "CHUNK_COUNT",
    "FULL",
    "IN_PLACE",
    "OUT_OF_PLACE",
    "ROOT",
    "Args",
    "BACKEND_CALLS",
    "Calls",
    "Collective",
    "Data",
    "Factor",
    "Invocation",
    "METHOD_PARAMS",
    "Method",
    "OPS_BY_NAME",
    "ReduceOp",
    "Slots",
    "TORCH_OP_NAMES",
    "method_call",
    "parse_op",
    "td_op",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})

IN_PLACE = "in-place"
OUT_OF_PLACE = "out-of-place"

# Where a participant's buffer sits relative to ``size`` (the larger buffer):
FULL = "full"    # the buffer is ``size`` bytes
CHUNK = "chunk"  # the buffer is ``size / n`` bytes (one of n equal chunks)
ROOT = "root"    # ``size`` bytes on the root, no buffer elsewhere

# What a row's ``count`` (nccl-tests' count column) counts:
BUFFER = "buffer"  # the elements of the whole (larger) buffer
CHUNK_COUNT = "chunk"  # the elements of one of n chunks (the buffer holds n × count)


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

OPS_BY_NAME: Mapping[str, ReduceOp] = {o.value: o for o in ReduceOp}
"""Each op by its exact name ("sum", ...): :func:`parse_op`'s common case, one dict lookup (hot paths use it)."""


def parse_op(op: object, arg: str = "op") -> ReduceOp:
    """Accept ``"sum"``/``"SUM"``/``ReduceOp.SUM`` (and torch.distributed.ReduceOp's names); clear errors."""
    if type(op) is ReduceOp:
        return op
    hit = OPS_BY_NAME.get(op) if type(op) is str else None
    if hit is not None:
        return hit
    # torch.distributed.ReduceOp members (RedOpType) carry the name we want.
    name = op if isinstance(op, str) else getattr(op, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{arg}: expected a str such as 'sum', but got {type(op).__name__} {op!r}")
    try:
        return ReduceOp(_TORCH_ALIASES.get(name.lower(), name.lower()))
    except ValueError:
        valid = ", ".join(repr(o.value) for o in ReduceOp)
        raise ValueError(f"{arg}: unknown reduction op {op!r}; expected one of {valid}") from None


TORCH_OP_NAMES: Mapping[ReduceOp, str] = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "AVG", ReduceOp.MAX: "MAX",
                                          ReduceOp.MIN: "MIN", ReduceOp.PROD: "PRODUCT"}
"""Each op's name in ``torch.distributed.ReduceOp`` (torch spells prod PRODUCT): the one home of the mapping."""


def td_op(td: Any, op: ReduceOp | None) -> Any:
    """Our reduction op as ``torch.distributed.ReduceOp`` (``td`` is the torch.distributed module)."""
    return getattr(td.ReduceOp, TORCH_OP_NAMES[op if op is not None else ReduceOp.SUM])


class Factor(str, enum.Enum):
    """The busbw correction factor, by the shape of the traffic (nccl-tests ``*GetBw``); the value is its legend."""

    ONE = "1"
    """Bound by one link: broadcast, reduce, send_recv."""
    N_MINUS_1_OVER_N = "(n-1)/n"
    """Each participant moves (n-1)/n of S: all_gather, reduce_scatter, all_to_all, scatter, gather."""
    TWO_N_MINUS_1_OVER_N = "2(n-1)/n"
    """A reduce-scatter followed by an all-gather: all_reduce."""

    def __call__(self, n: int) -> float:
        _check_n(n)
        if self is Factor.ONE:
            return 1.0
        if self is Factor.N_MINUS_1_OVER_N:
            return (n - 1) / n
        return 2 * (n - 1) / n


# ----- calls ------------------------------------------------------------------------------------------
class Args(NamedTuple):
    """The buffers and options of one call, as the caller holds them.

    ``inputs[k]`` and ``outputs[k]`` belong to the k-th participant held by this process (all n in
    one process; one per rank in a process group; ``None`` where the op has no such buffer).  A tuple,
    so that building one costs what a tuple costs: the Communicator builds one per plain call.
    """

    inputs: Sequence[Any]
    outputs: Sequence[Any]
    n: int
    root: int = 0
    """Root participant (its participant index: its group rank in a process group)."""
    op: ReduceOp | None = None
    rank: int = 0
    """This process's participant index in a process group: its group rank (0 in one process)."""
    devices: Sequence[Any] = ()
    """The held participants' devices (one-process libraries that take a destination)."""
    extra: Mapping[str, Any] = _EMPTY
    """The Communicator method's other arguments by name (all_to_all_v's ``split_sizes``); empty in bench."""
    ranks: Sequence[int] | None = None
    """The global rank of each participant of a process group that is not the default one (None: the
    participant index is the global rank)."""

    @property
    def global_root(self) -> int:
        """The root's global rank: what torch.distributed's ``src=``/``dst=`` take."""
        return self.root if self.ranks is None else self.ranks[self.root]


class Invocation(NamedTuple):
    """One resolved call: ``fn(*args, **kwargs)``, named ``name`` in its library (what ``prepare`` takes).

    ``returns_output`` is True when the call allocates its result instead of writing the caller's
    output buffers (torch.cuda.comm's ``reduce_add``): the returned tensor is participant ``root``'s output.
    """

    name: str
    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: Mapping[str, Any] = _EMPTY
    returns_output: bool = False

    def bind(self) -> Callable[[], Any]:
        """A zero-argument callable that performs the call (arguments resolved once, here)."""
        return functools.partial(self.fn, *self.args, **self.kwargs)

    def prepared(self, lib: Any, *, graph: bool = False) -> Callable[[], Any]:
        """The same call through ``lib.prepare(name, *args, **kwargs)``: checked once, rerun without checks.

        ``graph=True`` asks the library to capture the call into a CUDA graph that the callable replays.
        """
        if graph:
            return lib.prepare(self.name, *self.args, graph=True, **self.kwargs)
        return lib.prepare(self.name, *self.args, **self.kwargs)


Call = Callable[[Any, Args], Invocation]
"""``call(lib, args)``: the library object (module or Communicator) and the buffers → one Invocation."""

BACKEND_CALLS = ("torch_cuda_comm", "gpucomm_comm", "torch_distributed", "gpucomm_dist", "communicator")
"""The :class:`Calls` fields, one per library: torch.cuda.comm, gpucomm.comm, torch.distributed,
gpucomm.dist, and any :class:`gpucomm.communicator.Communicator`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Calls:
    """How each library performs one collective; None where it does not offer it (``unavailable`` says why)."""

    torch_cuda_comm: Call | None = None
    gpucomm_comm: Call | None = None
    torch_distributed: Call | None = None
    gpucomm_dist: Call | None = None
    communicator: Call | None = None
    unavailable: Mapping[str, str] = field(default_factory=dict)
    """Library field name → why it has no call (every None field has one)."""
    sum_only: Mapping[str, str] = field(default_factory=dict)
    """Library field name → why it reduces only with sum (torch.cuda.comm's reduce_add)."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """Library field name → what a reader of its measured rows must know (e.g. the call allocates)."""

    def __post_init__(self) -> None:
        for name in BACKEND_CALLS:
            if getattr(self, name) is None and not self.unavailable.get(name):
                raise ValueError(f"Calls: {name} is None without a reason in unavailable=")

    def get(self, library: str) -> Call | None:
        """The call for ``library`` (a :data:`BACKEND_CALLS` name), or None."""
        if library not in BACKEND_CALLS:
            raise ValueError(f"Calls: unknown library {library!r}; expected one of {', '.join(BACKEND_CALLS)}")
        return getattr(self, library)

    def why_not(self, library: str, op: ReduceOp | None = None) -> str | None:
        """Why ``library`` cannot perform this collective (with reduction ``op``); None when it can."""
        if self.get(library) is None:
            return self.unavailable[library]
        if op is not None and op is not ReduceOp.SUM and library in self.sum_only:
            return self.sum_only[library]
        return None


# ----- the Communicator's method ---------------------------------------------------------------------
METHOD_PARAMS = ("tensors", "outputs", "inputs", "root", "op")
"""The parameter names a Communicator method may take, and the :class:`Args` field each fills:
``tensors`` (in place: inputs and outputs at once), ``outputs``, ``inputs`` (one tensor per held
participant), ``root`` (a global participant index) and ``op`` (a reduction op).  Any other name is an
option of that collective alone and travels in ``Args.extra``."""


class Slots(NamedTuple):
    """Where a :class:`Method`'s parameters put each :class:`Args` field: a parameter index, -1 where absent."""

    inputs: int
    """``inputs`` (or ``tensors``: then ``outputs`` is the same index, the call is in place)."""
    outputs: int
    root: int
    op: int
    extra: tuple[tuple[str, int], ...]
    """``(name, index)`` of each parameter that is none of :data:`METHOD_PARAMS`."""


@dataclass(frozen=True, slots=True)
class Method:
    """A collective's Communicator method, as data: the row that has one gets it on every Communicator.

    :class:`gpucomm.communicator.Communicator` defines one method per row that has a ``Method``, named as
    the row, with these parameters (after ``self``) and defaults; both implementations run it from the
    row's library call (``calls.gpucomm_comm`` in one process, ``calls.gpucomm_dist`` on a process group).
    """

    params: tuple[str, ...]
    """Parameter names in order (see :data:`METHOD_PARAMS`)."""
    defaults: Mapping[str, Any]
    """Defaults of trailing parameters by name."""
    doc: str
    """What the method does, one or two sentences (its docstring)."""
    slots: Slots = field(init=False, repr=False, compare=False)
    """Where each :class:`Args` field is among the parameters (computed from ``params``)."""

    def __post_init__(self) -> None:
        at = {p: k for k, p in enumerate(self.params)}
        object.__setattr__(self, "slots", Slots(
            at.get("inputs", at.get("tensors", -1)), at.get("outputs", at.get("tensors", -1)),
            at.get("root", -1), at.get("op", -1), tuple((p, k) for p, k in at.items() if p not in METHOD_PARAMS)))
        seen_default = False
        for p in self.params:
            if p in self.defaults:
                seen_default = True
            elif seen_default:
                raise ValueError(f"Method: parameter {p!r} without a default follows one with a default")
        if set(self.defaults) - set(self.params):
            raise ValueError(f"Method: defaults for unknown parameters {sorted(set(self.defaults) - set(self.params))}")

    def args(self, values: Sequence[Any], n: int, *, rank: int = 0, devices: Sequence[Any] = (),
             ranks: Sequence[int] | None = None) -> Args:
        """The :class:`Args` of one method call: ``values`` in parameter order."""
        ins, outs, root, op, extra = self.slots
        v_in = values[ins] if ins >= 0 else ()
        return Args(v_in, values[outs] if outs >= 0 else v_in, n, values[root] if root >= 0 else 0,
                    values[op] if op >= 0 else None, rank, devices,
                    {p: values[k] for p, k in extra} if extra else _EMPTY, ranks)

    def values(self, a: Args) -> tuple:
        """The method's arguments for :class:`Args` ``a`` (inverse of :meth:`args`)."""
        pick = {"tensors": a.outputs, "outputs": a.outputs, "inputs": a.inputs, "root": a.root, "op": a.op}
        return tuple(pick[p] if p in pick else a.extra[p] for p in self.params)


def method_call(name: str, method: Method) -> Call:
    """The row's ``communicator`` call for a collective whose method takes only :data:`METHOD_PARAMS`."""

    def call(comm: Any, a: Args) -> Invocation:
        return Invocation(name, getattr(comm, name), method.values(a))

    return call


# ----- expected results -------------------------------------------------------------------------------
class Data:
    """What an expected-result function may ask of the inputs' formula (bench's check implements it).

    ``input(p, numel, start)`` is elements ``start … start+numel-1`` of participant p's input;
    ``reduced(numel, start)`` the same elements of the reduction over all n inputs; ``cat`` joins.
    """

    def input(self, p: int, numel: int, start: int = 0) -> Any:
        raise NotImplementedError

    def reduced(self, numel: int, start: int = 0) -> Any:
        raise NotImplementedError

    def cat(self, parts: Sequence[Any]) -> Any:
        raise NotImplementedError


Buffers = Callable[..., tuple[Any, Any]]
"""``buffers(p, n, count, root, placement, empty)`` → (input, output) of participant p; ``empty(numel)``
allocates on p's device."""
Expected = Callable[..., Any]
"""``expected(q, n, count, root, data)`` → participant q's output after the op (None: q has none)."""


# ----- the row ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Collective:
    """One collective, as data (see the module docstring); shapes split or concatenate along ``dim``."""

    name: str
    """The collective's name (a :class:`gpucomm.collectives.CollectiveName` once registered)."""
    order: int
    """Position in tables, flags and reports (smaller first)."""
    has_root: bool
    """True when one participant is the source or destination (broadcast, reduce, scatter, gather)."""
    reduces: bool
    """True when the collective combines values with a reduction op (sum, avg, max, min, prod)."""
    factor: Factor
    """The busbw factor as a function of n; its value is the legend text, e.g. "2(n-1)/n"."""
    input_buffer: str
    """One participant's input buffer relative to ``size``: "full", "chunk" or "root"."""
    output_buffer: str
    """One participant's output buffer relative to ``size``: "full", "chunk" or "root"."""
    count_unit: str
    """What the count column counts: "buffer" (the whole larger buffer) or "chunk" (one of n)."""
    steps: Callable[[int], int]
    """Sequential link steps of the ring/pipeline for n participants (see :meth:`ring_steps`)."""
    placements: tuple[str, ...]
    """Placements measured through the Communicator and torch.distributed ("in-place", "out-of-place")."""
    summary: str
    """One line: what every participant holds afterwards."""
    buffers: Buffers
    expected: Expected
    calls: Calls
    method: Method | None = None
    """The Communicator method (None: the Communicator has none, and ``calls.communicator`` is None too)."""

    def __post_init__(self) -> None:
        if (self.method is None) != (self.calls.communicator is None):
            raise ValueError(f"{self.name}: a row has a Communicator method exactly when it has a communicator call")

    # ----- bytes -----------------------------------------------------------------------------------
    def algbw_bytes(self, size: int) -> int:
        """The bytes S that algbw divides by the time: the nccl-tests size column, for every collective."""
        return _check_size(size)

    def busbw_factor(self, n: int) -> float:
        """nccl-tests' bus-bandwidth factor for n participants."""
        return self.factor(n)

    @property
    def legend(self) -> str:
        """The busbw definition in words, for reports: ``busbw = algbw × 2(n-1)/n``."""
        return f"busbw = algbw × {self.factor.value}"

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

    def ring_steps(self, n: int) -> int:
        """Sequential link steps on a ring of n: the latency (alpha) term's multiplier.

        all_reduce: 2(n-1) steps of S/n (a reduce-scatter, then an all-gather); all_gather,
        reduce_scatter, scatter, gather, all_to_all: n-1 steps of S/n; broadcast and reduce: a pipelined
        chain of n-1 hops that carries S once per link; send_recv: one step of S. n = 1: no step.
        """
        return self.steps(_check_n(n)) if n > 1 else 0

    def wire_bytes(self, size: int, n: int) -> float:
        """Bytes each participant sends over its link: S × busbw_factor(n), the bandwidth (beta) term.

        This is the quantity the bus bandwidth is a rate of.  One participant sends nothing (0).
        """
        if _check_n(n) == 1:
            return 0.0
        return self.algbw_bytes(size) * self.busbw_factor(n)

    def round_size(self, size: int, n: int, element_size: int) -> tuple[int, int]:
        """(count, bytes moved) for a requested ``size``: whole elements, and whole chunks where counted per chunk."""
        per = element_size * (_check_n(n) if self.count_unit == CHUNK_COUNT else 1)
        count = _check_size(size) // per
        return count, count * per

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
        grows = self.input_buffer == CHUNK
        splits = self.output_buffer == CHUNK
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
    if kind == FULL:
        return size
    if kind == CHUNK:
        return size // n
    return size if is_root else 0
