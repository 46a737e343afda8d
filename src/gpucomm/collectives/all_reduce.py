"""all_reduce: every participant ends with the elementwise reduction of all inputs.

Cost: a ring reduce-scatter then a ring all-gather, 2(n-1) steps of S/n each (ring_steps 2(n-1),
wire bytes 2(n-1)/n·S); busbw factor 2(n-1)/n.  In place everywhere; torch.cuda.comm has none.
"""

from __future__ import annotations

from gpucomm.collectives.spec import (
    BUFFER,
    FULL,
    IN_PLACE,
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
    return empty(count), empty(count)


def _expected(q, n, count, root, data):
    return data.reduced(count)


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("all_reduce", lib.all_reduce, (list(a.inputs), a.op), {"out": list(a.outputs)})


def _torch_distributed(td, a: Args) -> Invocation:
    return Invocation("all_reduce", td.all_reduce, (a.outputs[0],), {"op": td_op(td, a.op)})


def _gpucomm_dist(gd, a: Args) -> Invocation:
    return Invocation("all_reduce", gd.all_reduce, (a.outputs[0],), {"op": a.op})


METHOD = Method(("tensors", "op"), {"op": "sum"}, doc="Reduce every tensor and write the result into all of them, in place.")

ROW = Collective(
    name="all_reduce", order=30, has_root=False, reduces=True, factor=Factor.TWO_N_MINUS_1_OVER_N,
    input_buffer=FULL, output_buffer=FULL, count_unit=BUFFER, steps=lambda n: 2 * (n - 1),
    placements=(IN_PLACE,), summary="every participant holds the elementwise reduction of all inputs",
    buffers=_buffers, expected=_expected,
    calls=Calls(gpucomm_comm=_gpucomm_comm, torch_distributed=_torch_distributed, gpucomm_dist=_gpucomm_dist,
                communicator=method_call("all_reduce", METHOD),
                unavailable={"torch_cuda_comm": "torch.cuda.comm has no all_reduce"}),
    method=METHOD,
)
