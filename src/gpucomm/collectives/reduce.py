"""reduce: the root ends with the elementwise reduction of every participant's input.

Cost: a pipelined chain towards the root, n-1 hops carrying S once per link (ring_steps n-1, wire
bytes S); busbw factor 1.  torch.cuda.comm's ``reduce_add`` only sums and allocates its result.
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
    td_op,
)


def _buffers(p, n, count, root, placement, empty):
    if placement == IN_PLACE:
        t = empty(count)
        return t, t
    return empty(count), (empty(count) if p == root else None)  # only the root receives


def _expected(q, n, count, root, data):
    return data.reduced(count) if q == root else None


def _torch_cuda_comm(lib, a: Args) -> Invocation:
    return Invocation("reduce_add", lib.reduce_add, (list(a.inputs),),
                      {"destination": a.devices[a.root].index}, returns_output=True)


def _gpucomm_comm(lib, a: Args) -> Invocation:
    # destination None: out= (the root's tensor) says where the result goes
    return Invocation("reduce", lib.reduce, (list(a.inputs), None, a.op), {"out": a.outputs[a.root]})


def _torch_distributed(td, a: Args) -> Invocation:
    return Invocation("reduce", td.reduce, (a.outputs[0],), {"dst": a.global_root, "op": td_op(td, a.op)})


def _gpucomm_dist(gd, a: Args) -> Invocation:
    return Invocation("reduce", gd.reduce, (a.outputs[0],), {"dst": a.global_root, "op": a.op})


METHOD = Method(("tensors", "root", "op"), {"root": 0, "op": "sum"},
                doc=("Reduce every tensor into the root's tensor, in place; the other tensors are left as they "
                     "were."))

ROW = Collective(
    name="reduce", order=20, has_root=True, reduces=True, factor=Factor.ONE, input_buffer=FULL,
    output_buffer=ROOT, count_unit=BUFFER, steps=lambda n: n - 1, placements=(IN_PLACE,),
    summary="the root holds the elementwise reduction of all inputs",
    buffers=_buffers, expected=_expected,
    calls=Calls(torch_cuda_comm=_torch_cuda_comm, gpucomm_comm=_gpucomm_comm,
                torch_distributed=_torch_distributed, gpucomm_dist=_gpucomm_dist, communicator=method_call("reduce", METHOD),
                sum_only={"torch_cuda_comm": "torch.cuda.comm.reduce_add only sums"},
                notes={"torch_cuda_comm": "reduce_add allocates its result (no out=)"}),
    method=METHOD,
)
