"""all_gather: every participant ends with all inputs concatenated in participant order.

Cost: a ring, n-1 steps of S/n (ring_steps n-1, wire bytes (n-1)/n·S); busbw factor (n-1)/n.
``count`` is one participant's chunk; the output holds n chunks.  In place, participant p's input is
chunk p of its own output.  torch.cuda.comm has none.
"""

from __future__ import annotations

from gpucomm.collectives.spec import (
    CHUNK,
    CHUNK_COUNT,
    FULL,
    IN_PLACE,
    OUT_OF_PLACE,
    Args,
    Calls,
    Collective,
    Factor,
    Invocation,
    Method,
    method_call,
)


def _buffers(p, n, count, root, placement, empty):
    out = empty(n * count)
    inp = out[p * count:(p + 1) * count] if placement == IN_PLACE else empty(count)
    return inp, out


def _expected(q, n, count, root, data):
    return data.cat([data.input(p, count) for p in range(n)])


def _td_all_gather(td):
    # torch >= 2.13 names the tensor form all_gather_single and deprecates the old name: use what exists.
    return getattr(td, "all_gather_single", None) or td.all_gather_into_tensor


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("all_gather", lib.all_gather, (list(a.inputs),), {"out": list(a.outputs)})


def _torch_distributed(td, a: Args) -> Invocation:
    return Invocation("all_gather_into_tensor", _td_all_gather(td), (a.outputs[0], a.inputs[0]))


def _gpucomm_dist(gd, a: Args) -> Invocation:
    return Invocation("all_gather_into_tensor", gd.all_gather_into_tensor, (a.outputs[0], a.inputs[0]))


METHOD = Method(("outputs", "inputs"), {}, doc="Concatenate every participant's input along dim 0 into every output.")

ROW = Collective(
    name="all_gather", order=40, has_root=False, reduces=False, factor=Factor.N_MINUS_1_OVER_N,
    input_buffer=CHUNK, output_buffer=FULL, count_unit=CHUNK_COUNT, steps=lambda n: n - 1,
    placements=(OUT_OF_PLACE, IN_PLACE),
    summary="every participant holds all inputs concatenated in participant order",
    buffers=_buffers, expected=_expected,
    calls=Calls(gpucomm_comm=_gpucomm_comm, torch_distributed=_torch_distributed, gpucomm_dist=_gpucomm_dist,
                communicator=method_call("all_gather", METHOD),
                unavailable={"torch_cuda_comm": "torch.cuda.comm has no all_gather"}),
    method=METHOD,
)
