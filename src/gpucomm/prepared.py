"""``Prepared``: what every ``prepare()`` of gpucomm returns — a collective checked once, bound to its buffers.

:func:`gpucomm.comm.prepare`, :meth:`gpucomm.Communicator.prepare` and :func:`gpucomm.dist.prepare` all
return a :class:`Prepared`: call it with no arguments to rerun the collective on the same buffers, with
no per-call checks (MPI-4's persistent collectives, ``MPI_Allreduce_init`` … ``MPI_Start``).

It is a :class:`functools.partial` of the bound call, so calling it costs what calling the call costs:
a partial of a partial is flattened into one, and a prepared ``torch.distributed`` call is exactly the
object ``partial(td.all_reduce, t, op)`` a user would build.  What a call returns is the library's: the
outputs for :func:`gpucomm.comm.prepare` (in its public function's return type), the plain function's
return (None, or a work with ``async_op=True``) for :func:`gpucomm.dist.prepare`, and whatever the bound
kernel returns for a Communicator (not part of its contract).

No torch here: the type is shared by libraries that import torch and by code that only annotates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["Prepared"]


class Prepared(functools.partial):
    """A collective checked once and bound to its buffers; ``p()`` reruns it.

    Attributes:
        op: the collective's name in the library that prepared it.
        graphed: whether a call replays a captured CUDA graph.
        outputs: the tensors a call fills (None where the library does not say).
    """

    __slots__ = ()  # the attributes live in functools.partial's own __dict__

    op: str
    graphed: bool
    outputs: Any

    @classmethod
    def of(cls, run: Callable[[], Any], op: str, *, graphed: bool = False, outputs: Any = None) -> Prepared:
        """``run`` as a :class:`Prepared` named ``op`` (a partial ``run`` is flattened: no extra call)."""
        if isinstance(run, functools.partial):  # flattened here too when it carries attributes (a Prepared)
            p = cls(run.func, *run.args, **run.keywords)
        else:
            p = cls(run)
        p.op, p.graphed, p.outputs = op, graphed, outputs
        return p

    def __repr__(self) -> str:
        return f"Prepared(op={self.op!r}, graphed={self.graphed})"
