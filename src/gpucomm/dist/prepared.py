"""``prepare(op, *args, group=None, **kwargs)``: check a collective once, then call torch with nothing in between.

MPI-4 added *persistent collectives* (``MPI_Allreduce_init`` … ``MPI_Start``): a collective whose
arguments are bound and checked once, then started as often as needed.  This is that, for
PyTorch::

    import gpucomm.dist as gd

    grad = torch.zeros(1 << 20)
    step_all_reduce = gd.prepare("all_reduce", grad, op="avg")   # checks everything, once
    for batch in data:
        ...                                                      # write into grad
        step_all_reduce()                                        # == gd.all_reduce(grad, op="avg")

``op`` names a :mod:`gpucomm.dist` function (``"all_reduce"``, ``"reduce"``, ``"broadcast"``,
``"all_gather_into_tensor"``, ``"reduce_scatter_tensor"``, ``"all_to_all_single"``, ``"scatter"``,
``"gather"``, ``"send_recv"``, ``"send"``, ``"recv"``, ``"barrier"``; ``"all_gather"``,
``"reduce_scatter"`` and ``"all_to_all"`` are accepted for the tensor forms), and the other
arguments are exactly that function's own.  :func:`prepare`

* binds them to the function's signature (a ``TypeError`` names what does not fit);
* checks what torch would otherwise find late or never: every tensor is a tensor, on this rank's
  device type (CUDA under NCCL), dense, of one dtype, and the shapes agree with the world size
  (``output`` of an all-gather is ``n`` inputs along dim 0, split sizes sum to dim 0, a scatter list
  has ``n`` tensors on the root, …); ``src``/``dst`` are ranks of the group; this rank is in the
  group; ``op`` parses (``"avg"`` on an integer tensor is refused here);
* resolves everything that depends only on those facts: the torch op (``avg`` becomes torch's
  ``AVG`` on NCCL and sum-then-divide elsewhere), the backend's world size, the peers of
  ``send_recv`` and its ``P2POp`` list, the scratch buffer :func:`gpucomm.dist.reduce` uses on gloo;
* and, when the opt-in cross-rank check is on (``GPUCOMM_DEBUG_CHECK=1``), runs it once — then
  ``prepare`` is itself a collective that every rank of the group must call.

The returned :class:`~gpucomm.prepared.Prepared` takes no arguments, issues the torch.distributed call(s) on the **same
tensors** (their current contents: write into them between calls, never rebind them) and returns
what the plain function returns: ``None``, or a work object with ``async_op=True``.  Nothing is
checked per call, so a tensor resized or moved after :func:`prepare` is the caller's bug, as a
freed buffer is in MPI.

For most ops the callable is a :func:`functools.partial` of the torch.distributed function itself
with positional arguments only, and trailing ``group=None``/``async_op=False`` left out: exactly the
object a user would build for the raw call ``partial(td.all_reduce, t, td.ReduceOp.SUM)``, so a
prepared call costs what the raw call costs (a keyword would cost a dict per call, built by the
partial and again by torch's ``*args, **kwargs`` logging decorator).  ``reduce`` on NCCL reduces the
caller's tensor in place, as raw torch does (NCCL leaves non-destination buffers alone); only gloo's
non-destination ranks get a scratch copy.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

import torch
import torch.distributed as td

import gpucomm.dist.debug as debug
import gpucomm.dist.ops as ops
from gpucomm._validate import fail_type, fail_value
from gpucomm.prepared import Prepared

__all__ = ["PREPARABLE", "prepare"]

_ALIASES = {"all_gather": "all_gather_into_tensor", "reduce_scatter": "reduce_scatter_tensor",
            "all_to_all": "all_to_all_single"}


class _Ctx:
    """What one prepare call knows: the op's name, the group and its (backend, size, rank)."""

    def __init__(self, name: str, group):
        self.name, self.group = name, group
        self.backend, self.n, self.rank = _membership(name, group)
        self.device_type: str | None = None
        self.dtype: torch.dtype | None = None

    def tensor(self, arg: str, t) -> torch.Tensor:
        """Check one tensor argument: a dense tensor, on the group's device type, of the op's one dtype."""
        if not isinstance(t, torch.Tensor):
            raise fail_type(arg, "a torch.Tensor", t)
        if t.layout != torch.strided:
            raise fail_value(arg, "a dense (strided) tensor", f"layout {t.layout}", "call .to_dense() first")
        if self.backend == "nccl" and t.device.type != "cuda":
            raise fail_value(arg, "a CUDA tensor on an NCCL group", f"a tensor on {t.device}",
                             "move it with .cuda() before prepare()")
        if self.device_type is None:
            self.device_type, self.dtype = t.device.type, t.dtype
        elif t.device.type != self.device_type or t.dtype != self.dtype:
            raise fail_value(arg, f"a {self.dtype} tensor on {self.device_type} like the op's other tensors",
                             f"{t.dtype} on {t.device}", "use one dtype and device for every tensor")
        return t

    def rank_arg(self, arg: str, r) -> int:
        """Check a global rank (``src``/``dst``) that must belong to the group."""
        if isinstance(r, bool) or not isinstance(r, int):
            raise fail_type(arg, "an int global rank", r)
        world = td.get_world_size()
        if not 0 <= r < world:
            raise fail_value(arg, f"a global rank in [0, {world})", repr(r))
        if self.group is not None and r not in td.get_process_group_ranks(self.group):
            raise fail_value(arg, "a rank of the group", f"global rank {r}, which is not in it",
                             f"pick one of {td.get_process_group_ranks(self.group)}")
        return r

    def rows(self, arg: str, whole: torch.Tensor, part: torch.Tensor, what: str) -> None:
        """``whole`` must be ``n`` ``part``s along dim 0 (all-gather output, reduce-scatter input)."""
        want = (self.n * part.shape[0], *part.shape[1:]) if part.dim() else None
        if want is None or tuple(whole.shape) != want:
            raise fail_value(arg, f"shape {list(want) if want else '[n * rows, ...]'} ({what}, world size {self.n})",
                             f"shape {list(whole.shape)}", "size the buffers with the world size")


def _membership(name: str, group) -> tuple[str, int, int]:
    if not (td.is_available() and td.is_initialized()):
        raise RuntimeError(f"gpucomm.dist.prepare({name!r}): no process group is initialised; call "
                           f"gpucomm.dist.init() first (or run inside gpucomm.dist.launch)")
    if group is not None:
        if group is td.GroupMember.NON_GROUP_MEMBER:  # what new_group(ranks) returns to the other ranks
            raise fail_value("group", "a group this rank belongs to",
                             f"torch's non-member placeholder (this is rank {td.get_rank()}, which new_group "
                             f"left out)", "prepare the collective only on the group's ranks")
        if not isinstance(group, td.ProcessGroup):
            raise fail_type("group", "a torch.distributed.ProcessGroup or None", group)
        if td.get_rank() not in td.get_process_group_ranks(group):
            raise fail_value("group", "a group this rank belongs to",
                             f"a group of ranks {td.get_process_group_ranks(group)} (this is rank "
                             f"{td.get_rank()})", "prepare the collective only on the group's ranks")
    return ops._group_info(group)


def _torch_call(fn: Callable, *args, group=None, async_op: bool = False) -> Callable:
    """``partial(fn, *args[, group[, async_op]])``: positional, the default trailing arguments dropped."""
    if async_op:
        return functools.partial(fn, *args, group, True)
    if group is not None:
        return functools.partial(fn, *args, group)
    return functools.partial(fn, *args)


def _flag(arg: str, value) -> bool:
    if not isinstance(value, bool):
        raise fail_type(arg, "a bool", value)
    return value


def _with_divide(call: Callable, tensor: torch.Tensor | None, n: int, async_op: bool) -> Callable:
    """avg without a native AVG: the sum, then a division by the world size (in ``wait()`` when async)."""
    if tensor is None:
        return call
    if async_op:
        return lambda: ops._DivideOnWait(call(), tensor, n)

    def run():
        call()
        tensor.div_(n)

    return run


def _reduction(c: _Ctx, op, tensor: torch.Tensor) -> tuple[object, bool]:
    return ops._torch_op(op, tensor, c.group)


# ----- one builder per op: check, resolve, return the callable -------------------------------------
def _all_reduce(c: _Ctx, tensor, op, group, async_op):
    c.tensor("tensor", tensor)
    top, divide = _reduction(c, op, tensor)
    call = _torch_call(td.all_reduce, tensor, top, group=group, async_op=async_op)
    return _with_divide(call, tensor if divide else None, c.n, async_op), {"tensor": tensor}


def _reduce(c: _Ctx, tensor, dst, op, group, async_op):
    c.tensor("tensor", tensor)
    c.rank_arg("dst", dst)
    top, divide = _reduction(c, op, tensor)
    is_dst = td.get_rank() == dst
    if is_dst or c.backend == "nccl":
        call = _torch_call(td.reduce, tensor, dst, top, group=group, async_op=async_op)
        return _with_divide(call, tensor if divide and is_dst else None, c.n, async_op), {"tensor": tensor}
    scratch = torch.empty_like(tensor)  # gloo writes partial sums into non-destination buffers

    def run():
        scratch.copy_(tensor)
        return td.reduce(scratch, dst, top, group=group, async_op=async_op)

    return run, {"tensor": tensor}


def _broadcast(c: _Ctx, tensor, src, group, async_op):
    c.tensor("tensor", tensor)
    c.rank_arg("src", src)
    return _torch_call(td.broadcast, tensor, src, group=group, async_op=async_op), {"tensor": tensor}


def _all_gather(c: _Ctx, output_tensor, input_tensor, group, async_op):
    c.tensor("output_tensor", output_tensor)
    c.tensor("input_tensor", input_tensor)
    c.rows("output_tensor", output_tensor, input_tensor, "n input_tensors along dim 0")
    return (_torch_call(ops._all_gather_tensor, output_tensor, input_tensor, group=group, async_op=async_op),
            {"output_tensor": output_tensor, "input_tensor": input_tensor})


def _reduce_scatter(c: _Ctx, output, input, op, group, async_op):
    c.tensor("output", output)
    c.tensor("input", input)
    c.rows("input", input, output, "n outputs along dim 0")
    top, divide = _reduction(c, op, input)
    call = _torch_call(ops._reduce_scatter_tensor, output, input, top, group=group, async_op=async_op)
    return _with_divide(call, output if divide else None, c.n, async_op), {"output": output, "input": input}


def _tensor_list(c: _Ctx, arg: str, xs, like: torch.Tensor, root: bool, root_arg: str) -> list | None:
    """The root's list of ``n`` tensors shaped like ``like``; elsewhere None or an empty list."""
    if not root:
        empty = xs is None or (isinstance(xs, list | tuple) and len(xs) == 0)
        if not empty:
            raise fail_value(arg, f"None on a rank that is not {root_arg}", f"a {type(xs).__name__}",
                             f"pass {arg} only on rank {root_arg}")
        return None
    if isinstance(xs, torch.Tensor) or not isinstance(xs, Sequence):
        raise fail_type(arg, f"a list of {c.n} tensors on rank {root_arg}", xs)
    if len(xs) != c.n:
        raise fail_value(arg, f"{c.n} tensors (one per rank of the group)", f"{len(xs)}")
    for i, t in enumerate(xs):
        c.tensor(f"{arg}[{i}]", t)
        if t.shape != like.shape:
            raise fail_value(f"{arg}[{i}]", f"shape {list(like.shape)} like tensor", f"{list(t.shape)}")
    return list(xs)


def _scatter(c: _Ctx, tensor, scatter_list, src, group, async_op):
    c.tensor("tensor", tensor)
    c.rank_arg("src", src)
    xs = _tensor_list(c, "scatter_list", scatter_list, tensor, td.get_rank() == src, "src")
    return _torch_call(td.scatter, tensor, xs, src, group=group, async_op=async_op), {"tensor": tensor}


def _gather(c: _Ctx, tensor, gather_list, dst, group, async_op):
    c.tensor("tensor", tensor)
    c.rank_arg("dst", dst)
    xs = _tensor_list(c, "gather_list", gather_list, tensor, td.get_rank() == dst, "dst")
    return _torch_call(td.gather, tensor, xs, dst, group=group, async_op=async_op), {"tensor": tensor}


def _splits(c: _Ctx, arg: str, sizes, t: torch.Tensor, targ: str) -> list[int] | None:
    if sizes is None:
        return None
    if isinstance(sizes, str | bytes) or not isinstance(sizes, Sequence) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in sizes):
        raise fail_type(arg, f"a list of {c.n} ints", sizes)
    if len(sizes) != c.n or any(s < 0 for s in sizes) or sum(sizes) != (t.shape[0] if t.dim() else -1):
        raise fail_value(arg, f"{c.n} non-negative sizes summing to {targ}.shape[0]="
                         f"{t.shape[0] if t.dim() else None}", repr(list(sizes)))
    return list(sizes)


def _all_to_all(c: _Ctx, output, input, output_split_sizes, input_split_sizes, group, async_op):
    c.tensor("output", output)
    c.tensor("input", input)
    outs = _splits(c, "output_split_sizes", output_split_sizes, output, "output")
    ins = _splits(c, "input_split_sizes", input_split_sizes, input, "input")
    for arg, t, sizes in (("input", input, ins), ("output", output, outs)):
        if sizes is None and (t.dim() == 0 or t.shape[0] % c.n):
            raise fail_value(arg, f"dim 0 divisible by the world size {c.n}", f"shape {list(t.shape)}",
                             f"pad it, or pass {arg}_split_sizes")
    if ins is None and outs is None and output.shape != input.shape:
        raise fail_value("output", f"shape {list(input.shape)} like input (even splits)",
                         f"{list(output.shape)}")
    seen = {"output": output, "input": input} if ins is None and outs is None else {}
    return (_torch_call(td.all_to_all_single, output, input, outs, ins, group=group, async_op=async_op),
            seen)


def _send_recv(c: _Ctx, output, input, group, async_op):
    c.tensor("output", output)
    c.tensor("input", input)
    if output.shape != input.shape:
        raise fail_value("output", f"shape {list(input.shape)} like input", f"{list(output.shape)}")
    seen = {"output": output, "input": input}
    if c.n == 1:  # a world of one copies; the bound method saves an attribute lookup per call
        copy_ = output.copy_
        if async_op:
            def copy_async():
                copy_(input)
                return ops._AllWorks([])
            return copy_async, seen

        def copy():
            copy_(input)  # returns None, as the plain send_recv does (copy_ would return the tensor)
        return copy, seen
    peer = (lambda r: r) if group is None else (lambda r: td.get_global_rank(group, r))
    p2p = [td.P2POp(td.isend, input, peer((c.rank + 1) % c.n), group),
           td.P2POp(td.irecv, output, peer((c.rank - 1) % c.n), group)]
    batch, all_works = td.batch_isend_irecv, ops._AllWorks
    if async_op:
        return (lambda: all_works(batch(p2p))), seen

    def run():
        all_works(batch(p2p)).wait()

    return run, seen


def _send(c: _Ctx, tensor, dst, group, tag):
    c.tensor("tensor", tensor)
    c.rank_arg("dst", dst)
    return functools.partial(td.send, tensor, dst, group, tag), {}


def _recv(c: _Ctx, tensor, src, group, tag):
    c.tensor("tensor", tensor)
    if src is not None:
        c.rank_arg("src", src)
    return functools.partial(td.recv, tensor, src, group, tag), {}


def _barrier(c: _Ctx, group, async_op, device_ids):
    if device_ids is None and c.backend == "nccl":
        device_ids = [torch.cuda.current_device()]
    return functools.partial(td.barrier, group=group, async_op=async_op, device_ids=device_ids), {}


_BUILDERS: dict[str, tuple[Callable, Callable]] = {
    "all_reduce": (ops.all_reduce, _all_reduce),
    "reduce": (ops.reduce, _reduce),
    "broadcast": (ops.broadcast, _broadcast),
    "all_gather_into_tensor": (ops.all_gather_into_tensor, _all_gather),
    "reduce_scatter_tensor": (ops.reduce_scatter_tensor, _reduce_scatter),
    "scatter": (ops.scatter, _scatter),
    "gather": (ops.gather, _gather),
    "all_to_all_single": (ops.all_to_all_single, _all_to_all),
    "send_recv": (ops.send_recv, _send_recv),
    "send": (ops.send, _send),
    "recv": (ops.recv, _recv),
    "barrier": (ops.barrier, _barrier),
}

PREPARABLE: tuple[str, ...] = tuple(_BUILDERS) + tuple(_ALIASES)
"""Every name :func:`prepare` accepts."""


def prepare(op: str, /, *args, group=None, **kwargs) -> Prepared:
    """Check ``gpucomm.dist.<op>(*args, group=group, **kwargs)`` once; return a callable that reissues it.

    ``op`` is positional-only, so that a reduction's own ``op=`` can be passed by keyword:
    ``prepare("all_reduce", t, op="avg")``.

    Args:
        op: the :mod:`gpucomm.dist` function's name (see :data:`PREPARABLE`).
        *args, **kwargs: that function's own arguments (``async_op`` and ``op=`` included).
        group: the process group (None: the default group).

    Returns:
        a :class:`~gpucomm.prepared.Prepared` ``p`` with ``p()`` equivalent to the plain call on the
        same tensors, returning what it returns (a work object when ``async_op=True``).

    Raises:
        TypeError: ``op`` is not a str; an argument does not fit the function or has the wrong type.
        ValueError: an unknown op; shapes, dtypes, devices or ranks that do not fit the group.
        RuntimeError: no process group is initialised.
    """
    if not isinstance(op, str):
        raise fail_type("op", "the name of a gpucomm.dist collective such as 'all_reduce'", op)
    name = _ALIASES.get(op, op)
    if name not in _BUILDERS:
        raise fail_value("op", f"one of {', '.join(PREPARABLE)}", repr(op))
    fn, build = _BUILDERS[name]
    try:
        bound = inspect.signature(fn).bind(*args, group=group, **kwargs)
    except TypeError as exc:
        raise TypeError(f"gpucomm.dist.prepare({op!r}): the arguments do not fit "
                        f"gpucomm.dist.{name}{inspect.signature(fn)}: {exc}") from None
    bound.apply_defaults()
    values = dict(bound.arguments)
    if "async_op" in values:
        _flag("async_op", values["async_op"])
    if "tag" in values and (isinstance(values["tag"], bool) or not isinstance(values["tag"], int)):
        raise fail_type("tag", "an int", values["tag"])
    ctx = _Ctx(name, group)
    call, shapes = build(ctx, **values)
    if shapes and debug.debug_check_enabled():
        debug.verify(name, group, shapes)
    return Prepared.of(call, name)  # a partial stays one partial: the call costs what the raw call costs
