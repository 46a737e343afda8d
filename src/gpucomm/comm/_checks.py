"""Argument checks for :mod:`gpucomm.comm`.

Every public function validates *all* of its arguments here before it allocates or writes anything,
so a bad call leaves every caller-supplied output untouched.  Messages follow the house pattern:
name the argument, say what was expected, echo what came, say how to fix it.  ``TypeError`` for
types, ``ValueError`` for values (torch raises ``RuntimeError`` or even ``AssertionError`` for most
of these; see docs/semantics.md "Errors").
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from gpucomm._validate import check_tensor_list, describe, fail_type, fail_value
from gpucomm.comm._copy import overlapping_pair
from gpucomm.devices import cuda_device_count, parse_device

__all__ = [
    "DEVICE_OF",
    "DTYPE_OF",
    "LAYOUT_OF",
    "SHAPE_OF",
    "TORCH_REFUSALS",
    "cat_shape",
    "check_disjoint",
    "check_cat_shapes",
    "check_device",
    "check_dim",
    "check_exactly_one",
    "check_int",
    "check_outputs",
    "check_same_shape",
    "check_streams",
    "check_tensors",
    "dense_like",
    "devices_arg",
    "destination_arg",
    "needs_grad",
    "one_device",
]

# attribute readers shared by the comm and Communicator checks (one C-level call per tensor in map())
SHAPE_OF = operator.attrgetter("shape")
DTYPE_OF = operator.attrgetter("dtype")
LAYOUT_OF = operator.attrgetter("layout")
DEVICE_OF = operator.attrgetter("device")
_STRIDED = {torch.strided}
_USABLE_TYPES = ("cpu", "cuda")


# ----- the plain calls' one pass: helpers of the _lean_* paths of the kernel modules ---------------------
TORCH_REFUSALS = (RuntimeError, TypeError, ValueError, IndexError, AttributeError)
"""What torch's kernels (and attribute reads on a non-tensor) raise when they refuse a call before writing:
a one-pass path that meets one of these writes nothing and leaves the call to the named checks."""

_GRAD_ENABLED = torch.is_grad_enabled
_ANY_REQUIRES_GRAD = getattr(torch._C, "_any_requires_grad", None)


def needs_grad(*tensors: torch.Tensor) -> bool:
    """Whether grad mode is on and any of ``tensors`` requires grad (one C call for all, where torch has it)."""
    if not _GRAD_ENABLED():
        return False
    if _ANY_REQUIRES_GRAD is not None:
        return _ANY_REQUIRES_GRAD(*tensors)
    return any(t.requires_grad for t in tensors)


def one_device(ts: Sequence[torch.Tensor]) -> list[torch.device] | None:
    """Each tensor's device when they all share one 'cpu' or 'cuda' device, else None (one C-level pass;
    torch's kernels would run on a 'meta' device too, which gpucomm's checks refuse)."""
    devs = list(map(DEVICE_OF, ts))
    return devs if devs.count(devs[0]) == len(devs) and devs[0].type in _USABLE_TYPES else None


def cat_shape(shapes: Sequence[torch.Size], dim: int) -> tuple[int, tuple[int, ...]] | None:
    """``(dim wrapped, the shape of the tensors of ``shapes`` concatenated along it)``, asking only what
    ``torch.cat`` does not refuse itself (one ndim for all: it skips 1-d empty tensors among others; a dim
    in range); the other dims are left to cat.  None when not so (the named checks then decide)."""
    s0 = shapes[0]
    nd = len(s0)
    if not -nd <= dim < nd:
        return None
    d = dim % nd
    total = 0
    for s in shapes:
        if len(s) != nd:
            return None
        total += s[d]
    return d, (*s0[:d], total, *s0[d + 1:])


def dense_like(ts: Sequence[torch.Tensor], shape: Sequence[int], dtype: torch.dtype,
               devices: Sequence[torch.device] | None = None) -> bool:
    """True when every tensor is strided with ``shape`` and ``dtype`` (and sits on ``devices[i]``).

    The common case of the shape/dtype/device checks, asked in one C-level pass per attribute; when
    it says no, the callers run their per-tensor checks, which name the culprit.
    """
    return (set(map(SHAPE_OF, ts)) == {shape if type(shape) is torch.Size else torch.Size(shape)}
            and set(map(DTYPE_OF, ts)) == {dtype} and set(map(LAYOUT_OF, ts)) == _STRIDED
            and (devices is None or list(map(DEVICE_OF, ts)) == (devices if type(devices) is list else list(devices))))


def check_device(dev: torch.device, arg: str) -> torch.device:
    """Reject devices this process cannot use (unknown types, absent CUDA, index out of range)."""
    if dev.type == "cpu":
        return torch.device("cpu")
    if dev.type != "cuda":
        raise fail_value(arg, "a 'cpu' or 'cuda' device", f"{str(dev)!r}", "gpucomm.comm moves tensors "
                         "between CPU and CUDA devices only")
    count = cuda_device_count()
    if count == 0:
        raise fail_value(arg, "a device this machine has", f"{str(dev)!r} while CUDA is not available here",
                         "use 'cpu' devices (e.g. ['cpu', 'cpu']) to run without a GPU")
    index = torch.cuda.current_device() if dev.index is None else dev.index
    if index >= count:
        raise fail_value(arg, f"a CUDA device index below {count} (the visible device count)",
                         f"{str(dev)!r}", f"use one of cuda:0 .. cuda:{count - 1}")
    return torch.device("cuda", index)


def _one_device(d: Any, arg: str) -> torch.device:
    return check_device(parse_device(d, arg=arg), arg)


_DEVICE_LISTS: dict[tuple, tuple[torch.device, ...]] = {}
_DEVICE_LISTS_MAX = 256


def devices_arg(devices: Any, arg: str = "devices", *, allow_empty: bool = False) -> list[torch.device]:
    """Parse a device list (ints, strings, torch.device); each error names its position.

    Parsed lists are cached (keyed by the items and their types) because device lists repeat from
    call to call and parsing costs about a microsecond per device; lists naming ``"cuda"`` without
    an index are not cached, since they mean whatever device is current.
    """
    if type(devices) is list or type(devices) is tuple:
        try:
            key = (tuple(map(type, devices)), tuple(devices))
            hit = _DEVICE_LISTS.get(key)
        except TypeError:  # an unhashable item: parse it and let the error name it
            key, hit = None, None
        if hit is not None:
            return list(hit)
    else:
        key = None
    if isinstance(devices, int | str | torch.device) or not _iterable(devices):
        raise fail_type(arg, "a sequence of devices such as [0, 1] or ['cpu', 'cpu']", devices,
                        "wrap a single device in a list")
    items = list(devices)
    if not items and not allow_empty:
        raise fail_value(arg, "at least one device", "an empty sequence", "list the devices to use")
    for i, d in enumerate(items):
        if not isinstance(d, bool) and isinstance(d, str | torch.device) and _cuda_without_index(d):
            raise fail_value(f"{arg}[{i}]", "a CUDA device with an index, such as 0 or 'cuda:0'",
                             f"{str(d)!r}", "name the device explicitly: a list entry must not depend on "
                             "the current device (torch.cuda.comm refuses it too)")
    parsed = [_one_device(d, f"{arg}[{i}]") for i, d in enumerate(items)]
    if key is not None and all(map(_indexed, items)):
        if len(_DEVICE_LISTS) >= _DEVICE_LISTS_MAX:
            _DEVICE_LISTS.clear()
        _DEVICE_LISTS[key] = tuple(parsed)
    return parsed


def _cuda_without_index(d: str | torch.device) -> bool:
    if isinstance(d, torch.device):
        return d.type == "cuda" and d.index is None
    return d.strip() == "cuda"


def _indexed(d: Any) -> bool:
    """True when ``d`` names one device whatever the current device is."""
    if isinstance(d, torch.device):
        return d.type == "cpu" or d.index is not None
    if isinstance(d, str):
        return d == "cpu" or ":" in d or d.isdigit()
    return isinstance(d, int)


def destination_arg(destination: Any, arg: str = "destination") -> torch.device:
    """Parse one destination device (None and -1 are handled by the callers); cached like device lists."""
    try:
        key = ((type(destination),), (destination,))
        hit = _DEVICE_LISTS.get(key)
    except TypeError:
        key, hit = None, None
    if hit is not None:
        return hit[0]
    dev = _one_device(destination, arg)
    if key is not None and _indexed(destination):
        _DEVICE_LISTS[key] = (dev,)
    return dev


def _iterable(x: Any) -> bool:
    try:
        iter(x)
    except TypeError:
        return False
    return True


def check_tensors(xs: Any, arg: str, *, allow_empty: bool = False) -> list[torch.Tensor]:
    """A non-empty list/tuple of tensors on usable devices."""
    if type(xs) is list or type(xs) is tuple:  # the common case, checked without the ABC machinery
        items = list(xs)
        if items and all(type(t) is torch.Tensor and (t.is_cuda or t.is_cpu) and not t.is_nested for t in items):
            return items
    items = check_tensor_list(xs, arg, allow_empty=allow_empty)
    for i, t in enumerate(items):
        _tensor_device(t, f"{arg}[{i}]")
    return items


def _tensor_device(t: torch.Tensor, arg: str) -> None:
    if t.is_nested:  # torch's own errors for these are internal ("NestedTensorImpl doesn't support sizes")
        raise fail_value(arg, "a regular tensor (nested tensors have no single shape to split or reduce)",
                         describe(t), "pass its components, t.unbind(), as separate tensors")
    if not (t.is_cuda or t.is_cpu):
        raise fail_value(arg, "a tensor on a 'cpu' or 'cuda' device", describe(t),
                         "move it with .to('cpu') or .to('cuda') first")


def check_int(x: Any, arg: str) -> int:
    """An integer (bools refused): TypeError otherwise."""
    if isinstance(x, bool):
        raise fail_type(arg, "an int", x)
    try:
        return operator.index(x)
    except TypeError:
        raise fail_type(arg, "an int", x) from None


def check_dim(dim: Any, ndim: int, arg: str = "dim", *, what: str = "the input") -> int:
    """Wrap a dimension into ``0 .. ndim-1``; 0-dim tensors cannot be split or concatenated."""
    d = check_int(dim, arg)
    if ndim == 0:
        raise fail_value(arg, f"{what} to have at least one dimension", "a 0-dim tensor",
                         "view it as a 1-element vector first: t.reshape(1)")
    if not -ndim <= d < ndim:
        raise fail_value(arg, f"a dimension in [{-ndim}, {ndim - 1}] for {what} with {ndim} dimension(s)",
                         f"dim={d}")
    return d % ndim


def check_exactly_one(fn: str, a_name: str, a: Any, b_name: str, b: Any) -> None:
    """Exactly one of two mutually exclusive arguments must be given."""
    if (a is None) == (b is None):
        got = "neither" if a is None else "both"
        raise TypeError(f"{fn}: expected exactly one of '{a_name}' and '{b_name}', but got {got} "
                        f"({a_name}={describe(a)}, {b_name}={describe(b)}); pass '{a_name}' to have "
                        f"new tensors allocated, or '{b_name}' to supply them")


def check_same_shape(xs: Sequence[torch.Tensor], arg: str, *, ref: torch.Size | None = None,
                     ref_name: str | None = None) -> None:
    """Every tensor has the reference shape (default: the first one's)."""
    shape = xs[0].shape if ref is None else ref
    name = ref_name or f"{arg}[0]"
    for i, t in enumerate(xs):
        if t.shape != shape:
            raise fail_value(f"{arg}[{i}]", f"shape {list(shape)} (the shape of {name})",
                             f"shape {list(t.shape)}", "every participant's tensor must have the same shape")


def check_cat_shapes(xs: Sequence[torch.Tensor], dim: int, arg: str) -> list[int]:
    """Tensors that can be concatenated along ``dim`` (already wrapped); returns the concatenated shape."""
    first = xs[0]
    s0 = first.shape
    shapes = [t.shape for t in xs]
    if shapes.count(s0) == len(shapes):  # the common case: equal shapes
        return [*s0[:dim], s0[dim] * len(shapes), *s0[dim + 1:]]
    head, tail = s0[:dim], s0[dim + 1:]
    if all(s[:dim] == head and s[dim + 1:] == tail and len(s) == len(s0) for s in shapes):
        return [*head, sum(s[dim] for s in shapes), *tail]
    total = 0
    for i, t in enumerate(xs):
        if t.dim() != first.dim():
            raise fail_value(f"{arg}[{i}]", f"{first.dim()} dimensions (like {arg}[0])",
                             f"{t.dim()} dimensions ({describe(t)})", "every tensor needs the same ndim")
        for k in range(first.dim()):
            if k != dim and t.shape[k] != first.shape[k]:
                want = list(first.shape)
                want[dim] = t.shape[dim]
                raise fail_value(f"{arg}[{i}]", f"shape {want} (equal to {arg}[0] in every dim but "
                                 f"dim={dim})", f"shape {list(t.shape)}",
                                 f"only dim {dim} may differ between the tensors")
        total += t.shape[dim]
    shape = list(first.shape)
    shape[dim] = total
    return shape


def check_outputs(out: Any, n: int, arg: str = "out") -> list[torch.Tensor]:
    """A list of exactly ``n`` output tensors on usable devices."""
    outs = check_tensors(out, arg)
    if len(outs) != n:
        raise fail_value(arg, f"{n} tensors (one per participant)", f"{len(outs)}",
                         "pass one output tensor per input")
    return outs


def check_streams(streams: Any, devices: Sequence[torch.device], arg: str = "streams") -> list | None:
    """None, or one ``torch.cuda.Stream`` (or None) per device, each on that device."""
    if streams is None:
        return None
    if not _iterable(streams) or isinstance(streams, str | torch.Tensor):
        raise fail_type(arg, "a sequence of torch.cuda.Stream (or None), one per device", streams)
    items = list(streams)
    if len(items) != len(devices):
        raise fail_value(arg, f"{len(devices)} streams (one per device)", f"{len(items)}",
                         "pass one stream, or None, per device")
    for i, (s, dev) in enumerate(zip(items, devices, strict=True)):
        if s is None:
            continue
        if not isinstance(s, torch.cuda.Stream):
            raise fail_type(f"{arg}[{i}]", "a torch.cuda.Stream or None", s)
        if dev.type != "cuda" or s.device != dev:
            raise fail_value(f"{arg}[{i}]", f"a stream on {dev} (the device at index {i})",
                             f"a stream on {s.device}", f"create it with torch.cuda.Stream({str(dev)!r})"
                             if dev.type == "cuda" else "CPU destinations take no stream: pass None")
    return items


def check_disjoint(outs: Sequence[torch.Tensor], arg: str = "out", *, same_value: bool = False) -> None:
    """No two outputs may share memory: each receives its own result, so an overlap would leave one
    output holding part of another's (torch writes them one after another and only then notices).

    ``same_value``: the collective writes the same value to every output (broadcast, all_reduce,
    all_gather), so the very same view listed twice is allowed; partial overlaps never are.  Raised
    before anything is written.
    """
    pair = overlapping_pair(outs, same_view_ok=same_value)
    if pair is not None:
        i, j = pair
        raise fail_value(f"{arg}[{j}]", f"a tensor that does not overlap {arg}[{i}] (every output receives "
                         "its own result)", f"a tensor sharing memory with it ({describe(outs[j])})",
                         "allocate a separate tensor for every output")
