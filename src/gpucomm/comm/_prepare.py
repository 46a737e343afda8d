"""Prepared collectives: check once, then rerun on the same buffers with no per-call checks.

MPI 4's persistent collectives (``MPI_Allreduce_init`` + ``MPI_Start``) in PyTorch::

    p = gpucomm.comm.prepare("all_reduce", grads, op="avg", outputs=grads)   # checks, decides the route
    for step in range(steps):
        ...                  # refill grads in place
        p()                  # the all-reduce, on the same buffers

Contract:

* ``prepare`` checks every argument exactly as the public function does (same errors, raised at
  prepare time), allocates the outputs when ``outputs`` is None (as the public function would have
  allocated them; where that function returns the input itself or a view of it, so does ``p``), and
  decides everything that depends only on where the buffers live.
* ``p()`` runs the collective and returns the outputs (the same objects every time, in the public
  function's return type).  The buffers' **contents** may change between calls (that is the point);
  they must not be resized, re-strided, moved or freed, and no other tensor may be swapped in:
  nothing is checked again, so a violated contract gives torch's errors or wrong results.
* ``graph=True`` (every participant on one CUDA device, e.g. ``[cuda:0] * 4``) captures one call into a
  ``torch.cuda.CUDAGraph`` after warm-up calls on a side stream, and ``p()`` replays it: the
  buffers are then also fixed in memory for the graph's lifetime.  On CPU devices it is a
  ValueError.

Each kernel module registers the prepared form of its own public functions with :func:`prepared_form`
(check, allocate, bind the route); this module keeps the registry and no list of names, so a new
collective's module brings its prepared form with it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

from gpucomm._validate import fail_type, fail_value
from gpucomm.comm._graph import capture
from gpucomm.prepared import Prepared

__all__ = ["Form", "Prepared", "bind", "forms", "prepare", "prepared_form"]

Form = Callable[..., tuple[Callable[[], object], Any, list]]
"""``form(inputs, outputs, **options)`` → ``(run, result, touched)``: the public function's checks on
these arguments (its errors), then the callable that reruns it, what the function would return (the
outputs, allocated where ``outputs`` is None) and every tensor the run writes."""

_FORMS: dict[str, tuple[Form, tuple[str, ...]]] = {}


def prepared_form(name: str) -> Callable[[Form], Form]:
    """Register the decorated function as the prepared form of ``gpucomm.comm.<name>``.

    Its parameters are ``inputs``, ``outputs`` and the public function's other arguments by name (the
    options ``prepare`` accepts).
    """

    def register(form: Form) -> Form:
        if name in _FORMS:
            raise RuntimeError(f"prepared_form: {name!r} is registered twice")
        options = tuple(p for p in inspect.signature(form).parameters if p not in ("inputs", "outputs"))
        _FORMS[name] = (form, options)
        return form

    return register


def forms() -> list[str]:
    """The names :func:`prepare` accepts (every registered form), sorted."""
    return sorted(_FORMS)


def bind(op: str, inputs: Any, outputs: Any = None, /, **options: Any) -> tuple[Callable[[], object], Any, list]:
    """``gpucomm.comm.<op>``'s prepared form on these arguments: ``(run, result, touched)`` (see :data:`Form`).

    Raises what :func:`prepare` raises, except for ``graph``.  ``op``, ``inputs`` and ``outputs`` are
    positional only, so that a reduction's own ``op=`` is an option.
    """
    if not isinstance(op, str):
        raise fail_type("op", "a collective's name such as 'all_reduce'", op)
    entry = _FORMS.get(op)
    if entry is None:
        raise fail_value("op", f"one of {forms()}", repr(op), "name a gpucomm.comm function")
    form, allowed = entry
    extra = sorted(set(options) - set(allowed))
    if extra:
        raise TypeError(f"prepare: {op!r} takes the options {list(allowed) or 'none'}, but got {extra}; "
                        f"pass the options gpucomm.comm.{op} itself takes")
    return form(inputs, outputs, **options)


def prepare(op: str, /, inputs: Any, outputs: Any = None, *, graph: bool = False, **options: Any) -> Prepared:
    """Check a collective once and return a :class:`~gpucomm.prepared.Prepared` that reruns it on the same buffers.

    Args:
        op: the public function's name: ``"broadcast"``, ``"scatter"``, ``"gather"``,
            ``"reduce_add"``, ``"reduce"``, ``"all_reduce"``, ``"all_gather"``,
            ``"reduce_scatter"``, ``"all_to_all"``, ``"all_to_all_v"`` or ``"send_recv"``.
        inputs: what the function takes as its first argument (a tensor for broadcast and scatter,
            a list of tensors otherwise, a list of lists for all_to_all).
        outputs: what it takes as ``out=`` (None: allocated here, as the function would allocate).
        graph: capture the call into a CUDA graph (every participant on a GPU).
        **options: the function's other arguments by name (``op=``, ``dim=``, ``devices=``,
            ``destination=`` (or ``root=``), ``chunk_sizes=``, ``streams=``, ``split_sizes=``).

    Returns:
        :class:`~gpucomm.prepared.Prepared`; ``p()`` runs the collective and returns the outputs
        (``p.outputs``).

    Raises:
        TypeError, ValueError: exactly what the public function raises for these arguments, at
            prepare time; an unknown ``op`` or option; ``graph=True`` off the GPU.
    """
    if not isinstance(graph, bool):
        raise fail_type("graph", "a bool", graph)
    run, result, touched = bind(op, inputs, outputs, **options)
    if graph:
        devices = [t.device for t in _flat(inputs)] + [t.device for t in touched]
        run = capture(run, devices)
    return Prepared.of(functools.partial(_run_then, run, result), op, graphed=graph, outputs=result)


def _run_then(run: Callable[[], object], result: Any) -> Any:
    run()
    return result


def _flat(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for item in x for t in _flat(item)]
