"""The seam: what code outside ``gpucomm/comm/`` may use of comm's insides, and the routes every kernel shares.

It is the only private module of ``gpucomm.comm`` that code outside ``gpucomm/comm/`` may import (the
Communicator does; ``tests/test_imports.py`` enforces it), so comm may reorganise everything else.  It
offers:

* :func:`bind` — a collective's prepared form, by its public function's name: the function's own checks
  (same errors), then ``(run, result, touched)``: a zero-argument callable that reruns the collective on
  these buffers with no checks (everything that depends only on where the buffers live — aliasing, the
  NCCL/copy/torch-C++ route — decided once), what the public function would return, and every tensor
  it writes.  The engine of :func:`gpucomm.comm.prepare` and ``LocalCommunicator.prepare``.  Each kernel
  module registers the forms of its own functions (:func:`gpucomm.comm._prepare.prepared_form`).
* :func:`local_form` — how a ``LocalCommunicator`` runs a collective row's method on the tensors it holds
  (registered by the kernel module that implements the row, found by the row's name).
* :func:`capture` — CUDA-graph capture of such a ``run``.
* :func:`held_route` — a LocalCommunicator's one-pass route of a plain call into torch's C++ loop, which
  remembers the storages of the calls it checked (see "Verdicts that cannot go stale" below).
* torch.cuda.comm's own C++ loops (:data:`BROADCAST_OUT`, :data:`SCATTER_OUT`, :data:`SCATTER`): the
  **one** home of torch's direct routes, with :func:`broadcast_out` and :func:`scatter_out`, which hand a
  plain call to them under the contract below, and the small helpers every kernel module's binding uses.

**Letting torch check what torch checks.**  torch.cuda.comm's C++ loops check, before their first copy,
everything their own checks cover: a non-tensor argument (the binding's TypeError), an output that is not
a CUDA tensor, an output shape that does not fit the source (and, for scatter, a dim out of range or sizes
that do not add up) — RuntimeError or IndexError, with nothing written.  They do **not** check what
gpucomm adds: that no output shares memory with the source or with another output (they would race, or
leave one output holding part of another's value), that there is at least one output (broadcast), that
the source has a dim to split (scatter reads past a 0-dim source's sizes).  :func:`broadcast_out` and
:func:`scatter_out` check exactly those — the storages in one C-level pass — and hand the call to torch's
loop; when that check says no, or the loop refuses the call, they return None having written nothing,
and the caller runs its full checks, which name the problem in gpucomm's words and with gpucomm's
exception types, and then its own route (which also takes what gpucomm accepts and torch does not, such as
CPU outputs).  Autograd needs no check of its own: the loops write each output with ``copy_``, exactly as
gpucomm's own route does, so a tensor that requires grad meets the same ``copy_`` either way.  A CPU source
larger than ``_host.DIRECT_MAX_BYTES`` is left to the caller too: pinned staging beats torch's pageable
copies there.

**Verdicts that cannot go stale** (:func:`held_route`).  A LocalCommunicator's plain broadcast or scatter
adds to torch's checks that each tensor sits on its participant's device and that no two share a storage.
Asked afresh, that is two attribute reads per tensor (``t.device``, ``t.untyped_storage()``), each a new
Python object, about 700 host instructions apiece under callgrind (``benchmarks/host_instructions.py``).
Both facts belong to the *storage*, not to the tensor object: a storage never changes device, and two
storage objects are one memory exactly when they are the same object (torch keeps one Python object per
storage).  So a held route remembers, per call it checked, the storages it saw (weak references: it keeps
no memory alive) and on a later call asks only whether each tensor still views the same storage object —
one read and one identity test per tensor.  ``t.data = other``, ``t.set_(...)`` and
``torch.utils.swap_tensors`` give the tensor another storage (the verdict is asked again); a freed storage's
weak reference answers None, so a new storage at a freed address is never taken for the old one;
``resize_`` keeps the storage object and its device.  What can change while the storage stays — the
shape, the offset, the dtype — is not remembered: torch's loop checks the shapes itself, and a scatter
reads its outputs' element counts on every call (equal chunks).  Remembering the devices themselves
(``t.device`` per tensor) would save nothing: any witness that a tensor was not re-pointed costs one read
per tensor, the same as reading its device.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from gpucomm.comm import _copy
from gpucomm.comm._graph import capture
from gpucomm.comm._host import DIRECT_MAX_BYTES
from gpucomm.comm._prepare import bind, forms

__all__ = [
    "BROADCAST_OUT",
    "SCATTER",
    "SCATTER_OUT",
    "Held",
    "LocalForm",
    "Run",
    "bind",
    "bind_copies",
    "broadcast_out",
    "capture",
    "cuda_alike",
    "forms",
    "held_route",
    "held_routes",
    "local_form",
    "local_forms",
    "noop",
    "one_device",
    "scatter_out",
    "unshared",
]

Run = Callable[[], object]

# torch.cuda.comm's own C++ loops (CUDA builds only).  When every tensor is a CUDA tensor of one
# dtype and nothing aliases, they issue exactly the copies the copy path would, without a Python
# round trip per copy: the cheapest correct route for latency-bound calls.
BROADCAST_OUT = getattr(torch._C, "_broadcast_out", None)
"""``torch.cuda.comm.broadcast(t, out=...)``'s C++: checks every shape, then one ``copy_`` per output."""
SCATTER_OUT = getattr(torch._C, "_scatter_out", None)
"""``torch.cuda.comm.scatter(t, out=...)``'s C++: checks, then one ``copy_`` per chunk."""
SCATTER = getattr(torch._C, "_scatter", None)
"""``torch.cuda.comm.scatter(t, devices)``'s C++: each chunk ``.to(device, non_blocking=True)``."""

_REFUSED = (RuntimeError, TypeError, IndexError, ValueError)  # what torch's loops raise (NotImplementedError too)
_NOT_TAKEN = (*_REFUSED, AttributeError)  # ... and what reading a non-tensor entry raises


def _one_object_per_storage() -> bool:
    """Whether torch hands out one Python object per storage (its PyObject preservation, torch >= 2.1): then
    two tensors share memory exactly when their ``untyped_storage()`` is the same object."""
    t = torch.empty(2)
    return t.untyped_storage() is t[1:].untyped_storage()


_STORAGE_OBJECTS = _one_object_per_storage()
_UNTYPED = torch.Tensor.untyped_storage


def unshared(first: torch.Tensor, rest: Sequence[torch.Tensor]) -> bool:
    """Whether ``first`` and every tensor of ``rest`` sit in storages of their own (one C-level pass).

    False, never an error, for anything without a storage (a sparse tensor, a non-tensor): the caller's
    checks name it.
    """
    try:
        if _STORAGE_OBJECTS:
            return len({first.untyped_storage(), *map(_UNTYPED, rest)}) == len(rest) + 1
        # older torch: compare addresses (empty storages share one, which only costs the checked route)
        return len({first.untyped_storage().data_ptr(), *(t.untyped_storage().data_ptr() for t in rest)}
                   ) == len(rest) + 1
    except (AttributeError, TypeError, RuntimeError):  # NotImplementedError is a RuntimeError
        return False


def broadcast_out(src: torch.Tensor, outs: Sequence[torch.Tensor]) -> list[torch.Tensor] | None:
    """``torch.cuda.comm.broadcast(src, out=outs)``'s C++ loop, when the contract above lets it take the call.

    Returns what the loop returns (the outputs, as a list; each now holds ``src``, enqueued as torch enqueues
    it), or None: nothing was written, and the caller checks and routes the call itself.
    """
    if BROADCAST_OUT is None or not outs:
        return None
    try:
        if (src.nbytes <= DIRECT_MAX_BYTES or src.is_cuda) and unshared(src, outs):
            return BROADCAST_OUT(src, outs)
    except _REFUSED:
        pass
    return None


def scatter_out(src: torch.Tensor, outs: Sequence[torch.Tensor], dim: int) -> list[torch.Tensor] | None:
    """``torch.cuda.comm.scatter(src, out=outs, dim=dim)``'s C++ loop (no streams), under the contract above.

    Returns the loop's result (output i now holds chunk i of ``src`` along ``dim``), or None: nothing was
    written.
    """
    if SCATTER_OUT is None:
        return None
    try:
        if src.ndim and (src.nbytes <= DIRECT_MAX_BYTES or src.is_cuda) and unshared(src, outs):
            return SCATTER_OUT(src, outs, dim, None)
    except _REFUSED:
        pass
    return None


def noop() -> None:
    """The run of a collective with nothing to move (a world of one, outputs that are the inputs)."""
    return None


def cuda_alike(outs: Sequence[torch.Tensor], src: torch.Tensor) -> bool:
    """Every tensor on CUDA with ``src``'s dtype (what torch's C++ loops need besides no aliasing, which the
    caller has established)."""
    dtype = src.dtype
    return src.is_cuda and all(t.is_cuda and t.dtype == dtype for t in outs)


def one_device(dsts: Sequence[torch.Tensor], *srcs: torch.Tensor) -> bool:
    """Every tensor on ``srcs[0]``'s device."""
    device = srcs[0].device
    return all(t.device == device for t in dsts) and all(t.device == device for t in srcs)


def bind_copies(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> Run:
    """``dsts[i].copy_(srcs[i])`` for disjoint pairs on one device, in one call where it pays.

    :func:`gpucomm.comm._copy.copy_many`'s choice (one fused ``_foreach_copy_`` or a loop of
    ``copy_``), made once here instead of on every call.
    """
    if (_copy._FOREACH_COPY is not None
            and (len(dsts) >= _copy.FOREACH_MIN_COPIES or len(dsts) > 1 and dsts[0].is_cpu)
            and dsts[0].nbytes <= _copy.FOREACH_MAX_BYTES and _copy._batchable(dsts, srcs, None)
            and not any(t.requires_grad for t in (*dsts, *srcs))):
        return functools.partial(_copy._FOREACH_COPY, dsts, srcs, non_blocking=True)
    if len(dsts) == 1:
        return functools.partial(dsts[0].copy_, srcs[0], non_blocking=True)
    return functools.partial(_copy_loop, [(d.copy_, s) for d, s in zip(dsts, srcs, strict=True)])


def _copy_loop(pairs: list) -> None:
    for copy_, src in pairs:
        copy_(src, non_blocking=True)


# ----- the LocalCommunicator's forms -------------------------------------------------------------------
class Held(NamedTuple):
    """What a LocalCommunicator knows of its participants, decided once, when it is created."""

    devices: tuple[torch.device, ...]
    """Participant i's device."""
    one_device: list[torch.device] | None
    """Every participant's device when they all share one (``["cuda:0"] * 4``, ``["cpu"] * 4``: everything can
    run as one kernel there), else None."""
    distinct: bool
    """Every participant on a device of its own: their tensors cannot share memory."""


LocalForm = Callable[[Held, Sequence[Any], Sequence[Any], int, Any, Mapping[str, Any]], None]
"""``form(held, inputs, outputs, root, op, extra)``: a LocalCommunicator's method of one collective row, run on
the tensors it holds, after the Communicator's own checks: ``inputs`` and ``outputs`` hold one tensor per
participant, each on its participant's device (``inputs is outputs`` for in-place rows; only the root's
entry of a root-only list), ``root`` is a participant index and the shapes are those the row implies.  The
form makes every check of the gpucomm.comm function the row calls (same errors), then runs it; it returns
nothing (the Communicator returns the outputs)."""

_LOCAL: dict[str, LocalForm] = {}


def local_form(name: str) -> Callable[[LocalForm], LocalForm]:
    """Register the decorated function as the LocalCommunicator's form of the collective row ``name``."""

    def register(form: LocalForm) -> LocalForm:
        if name in _LOCAL:
            raise RuntimeError(f"local_form: {name!r} is registered twice")
        _LOCAL[name] = form
        return form

    return register


def local_forms() -> dict[str, LocalForm]:
    """Every registered LocalCommunicator form, by row name."""
    return dict(_LOCAL)


# ----- held routes: a LocalCommunicator's plain calls into torch's loops, remembered per storage --------
HeldRoute = Callable[..., Any]
"""A row's held route: a function with the parameters it was made with (:func:`held_route`; by default
``route(inputs, outputs, root)``) that runs a LocalCommunicator's plain call of the row through torch's C++
loop when every check (the Communicator's: one tensor per participant on its device, a root among them;
gpucomm's: storages of their own, equal chunks; torch's own) passes, and returns ``result`` (by default True);
otherwise it returns ``refused(...)`` of the same arguments (by default False), having written nothing unless
torch's loop itself failed after its checks (a ``copy_`` refusal part-way: the checked route then calls the
same loop again, and its copies write the same values); ``refused`` runs the named checks and route."""

_MEMO_ENTRIES = 64  # checked calls remembered per route (storage sets that alternate, e.g. one per layer); then
# the memo starts again (an entry is filed under its first storage's id: sets sharing that storage replace each other)


class _Refused(ValueError):
    """A held route's miss path: this call is not one to remember (the route returns ``refused(...)``)."""


def _remember(memo: dict, root: int, tensors: tuple, storages: tuple, devices: tuple) -> tuple | None:
    """The entry that remembers a call of ``root`` on ``tensors`` (whose storages are ``storages``), when each
    tensor sits on ``devices[i]`` and no two storages are one; else None.  The entry is ``(root, *refs)``,
    weak references to the storages (it keeps no memory alive), filed under the first storage's id."""
    if list(map(_DEVICE, tensors)) != list(devices) or len(set(storages)) != len(storages):
        return None
    if len(memo) >= _MEMO_ENTRIES:
        memo.clear()
    entry = memo[id(storages[0])] = (root, *map(weakref.ref, storages))
    return entry


def _recall(memo: dict, root: Any, tensors: tuple, storages: tuple, devices: tuple, rooted: bool) -> tuple:
    """A route's miss path (the call does not view the storages of the entry it last used): the entry filed under
    the first storage when the call views its storages (and, ``rooted``, has its root), else a fresh check
    (:func:`_remember`).  Raises :class:`_Refused` for a root that is not a participant index (an int: not a
    bool) or a call the check refuses."""
    n = len(devices)
    if type(root) is not int or not 0 <= root < n:
        raise _Refused
    e = memo.get(id(storages[0]))
    if e is not None and (not rooted or e[0] == root) and all(map(_held_by, storages, e[1:])):
        return e
    e = _remember(memo, root, tensors, storages, devices + (devices[root],) if rooted else devices)
    if e is None:
        raise _Refused
    return e


def _held_by(storage: Any, ref: weakref.ref) -> bool:
    return storage is ref()


def _gone() -> None:
    """A reference to no storage: what a route's first entry holds before any call was checked."""
    return None


_DEVICE = operator.attrgetter("device")


def _each(n: int, fmt: str, sep: str = ", ") -> str:
    return sep.join(fmt.format(i=i) for i in range(n))


def _listed(arg: str) -> str:
    """A list or a tuple (the containers a route unpacks: never an iterator it would consume), a list asked first."""
    return f"(type({arg}) is list or type({arg}) is tuple)"


def _route_source(name: str, n: int, params: Sequence[str], defaults: Mapping[str, Any], result: str,
                  cuda: bool) -> str:
    """The source of ``name``'s held route for ``n`` participants, unrolled (a loop over the tensors costs about
    half as much again per tensor in CPython: iterator, tuple unpacking), as a function of ``params``.  The route
    asks first whether the call views the storages of the entry it last used (``last``: one storage read and one
    identity test per tensor), and only then the memo and a fresh check (:func:`_recall`).  ``cuda``: every
    participant is a CUDA device, so the root's input is never a host tensor to stage (no size read)."""
    rooted = name == "scatter"  # the entry's root matters: the root's input is one of the tensors asked
    ins = "tensors" if "tensors" in params else "inputs"
    outs = "tensors" if "tensors" in params else "outputs"
    signature = ", ".join(f"{p}=defaults[{p!r}]" if p in defaults else p for p in params)
    ts = _each(n, "t{i}") + (", src" if rooted else "")
    ss = _each(n, "s{i}") + (", ss" if rooted else "")
    refs = _each(n, "r{i}") + (", rs" if rooted else "")
    same = _each(n, "s{i} is r{i}()", " and ") + (" and ss is rs()" if rooted else "")
    staged = "" if cuda else f"""
                if not cuda_at[root] and {"src" if rooted else f"{ins}[root]"}.nbytes > DIRECT_MAX_BYTES:
                    raise _Refused"""
    if rooted:  # every output is one of n equal chunks of the root's input
        # ``at is root``: the entry's root is an int from a checked call, 0 .. n-1, one object each in CPython (a
        # bool is not one of them, nor a negative index: the miss path asks those, and refuses them)
        accepted = f"{_listed(outs)} and {_listed(ins)}"
        fast = f"at is root and {same}"
        unpack = f"""{_each(n, "t{i}")} = {outs}
                {_each(n, "_")} = {ins}  # n inputs (cheaper than len()); only the root's is read
                src = {ins}[root]
                ss = src.untyped_storage()"""
        # Equal chunks, asked in n element counts: torch's loop checks that every output has the source's other
        # dims and that their dim-0 sizes add up to the source's; so outputs 0 .. n-2 of k elements each and a
        # source of n*k leave output n-1 k elements too.  k >= 1 (an empty chunk's count says nothing about its
        # dim 0), so the source has n*k >= 2 elements: not 0-dim, which torch's loop would misread.
        numels = "".join(f" and t{i}.numel() == k" for i in range(1, n - 1))
        run = f"""k = t0.numel(){staged}
                if k{numels} and src.numel() == {n} * k:
                    SCATTER_OUT(src, {outs}, 0, None)
                    return {result}"""
    else:  # broadcast, in place: the root's tensor is the source, the others receive it
        accepted = f"{_listed(ins)} and type(root) is int and 0 <= root < {n}"
        fast = same
        unpack = f"{ts} = {ins}"
        run = f"""others = [{ts}]{staged}
                del others[root]
                BROADCAST_OUT({ins}[root], others)
                return {result}"""
    return f"""
def make(memo, devices, cuda_at, refused, defaults):
    last = (-1, *[_gone] * {n + rooted})

    def {name}({signature}):
        nonlocal last
        if {accepted}:
            try:
                {unpack}
                {_each(n, "s{i} = t{i}.untyped_storage()", chr(10) + " " * 16)}
                at, {refs} = last
                if not ({fast}):
                    last = _recall(memo, root, ({ts},), ({ss},), devices, {rooted})
                {run}
            except _NOT_TAKEN:
                pass
        return refused({", ".join(params)})
    return {name}
"""


@functools.cache
def _route_maker(name: str, n: int, params: tuple[str, ...], defaults: tuple, result: str, cuda: bool
                 ) -> Callable[..., HeldRoute]:
    space: dict[str, Any] = {}
    source = _route_source(name, n, params, dict(defaults), result, cuda)
    exec(compile(source, f"<gpucomm held route {name} n={n}>", "exec"), globals(), space)
    return space["make"]


_LOOPS = {"broadcast": "BROADCAST_OUT", "scatter": "SCATTER_OUT"}  # the rows with a held route: torch's loop


def held_routes() -> frozenset[str]:
    """The rows that have a held route (where torch's loop exists: see :func:`held_route`)."""
    return frozenset(_LOOPS)


def _refuse(*args: Any) -> bool:
    return False


def held_route(name: str, held: Held, params: Sequence[str] = ("inputs", "outputs", "root"),
               defaults: Mapping[str, Any] | None = None, result: str = "True",
               refused: Callable[..., Any] = _refuse) -> HeldRoute | None:
    """Row ``name``'s held route on ``held``'s participants (see the module docstring and :data:`HeldRoute`), or
    None: no such route (the row has none, torch's loop is not in this build, one participant, or a torch
    without one Python object per storage).

    The route is a function of ``params`` (with ``defaults``) — the Communicator method's own, so that it can
    *be* the method of one communicator, one Python call per plain call: ``inputs`` / ``outputs`` / ``tensors``
    and ``root`` name the call's slots; it returns the expression ``result`` (over ``params``) when torch's loop
    ran and ``refused(*params)`` when it did not take the call."""
    loop = _LOOPS.get(name)
    n = len(held.devices)
    if loop is None or globals()[loop] is None or n < 2 or not _STORAGE_OBJECTS:
        return None
    cuda_at = tuple(d.type == "cuda" for d in held.devices)
    make = _route_maker(name, n, tuple(params), tuple((defaults or {}).items()), result, all(cuda_at))
    return make({}, held.devices, cuda_at, refused, dict(defaults or {}))
