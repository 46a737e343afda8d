"""broadcast: every participant ends with a full copy of the root's tensor.

Cost: a pipelined chain, n-1 hops that carry S once per link (ring_steps n-1, wire bytes S).
busbw factor 1.  Measured in place through the Communicator and torch.distributed (the root's
buffer is the source); torch.cuda.comm copies out of place into ``out=``.
"""

from __future__ import annotations

from gpucomm.collectives.spec import (
    BUFFER,
    FULL,
    IN_PLACE,
    ROOT,
    Args,
    Calls,
    Collective,
    Factor,
    Invocation,
    Method,
    method_call,
)


def _buffers(p, n, count, root, placement, empty):
    if placement == IN_PLACE:
        t = empty(count)
        return t, t
    return (empty(count) if p == root else None), empty(count)


def _expected(q, n, count, root, data):
    return data.input(root, count)


def _torch_cuda_comm(lib, a: Args) -> Invocation:
    return Invocation("broadcast", lib.broadcast, (a.inputs[a.root],), {"out": list(a.outputs)})


def _gpucomm_comm(lib, a: Args) -> Invocation:
    src = a.inputs[a.root]  # in place, the root's output is the source itself: nothing to copy there
    return Invocation("broadcast", lib.broadcast, (src,), {"out": [o for o in a.outputs if o is not src] or [src]})


def _distributed(lib, a: Args) -> Invocation:
    # torch.distributed and gpucomm.dist take the same arguments: one call serves both libraries
    return Invocation("broadcast", lib.broadcast, (a.outputs[0],), {"src": a.global_root})


METHOD = Method(("tensors", "root"), {"root": 0}, doc="Copy the root's tensor into every tensor, in place.")

ROW = Collective(
    name="broadcast", order=10, has_root=True, reduces=False, factor=Factor.ONE, input_buffer=ROOT,
    output_buffer=FULL, count_unit=BUFFER, steps=lambda n: n - 1, placements=(IN_PLACE,),
    summary="every participant holds a full copy of the root's tensor",
    buffers=_buffers, expected=_expected,
    calls=Calls(torch_cuda_comm=_torch_cuda_comm, gpucomm_comm=_gpucomm_comm,
                torch_distributed=_distributed, gpucomm_dist=_distributed,
                communicator=method_call("broadcast", METHOD)),
    method=METHOD,
)
