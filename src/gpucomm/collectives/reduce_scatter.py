"""reduce_scatter: participant i ends with chunk i of the elementwise reduction of all inputs.

Cost: a ring, n-1 steps of S/n (ring_steps n-1, wire bytes (n-1)/n·S); busbw factor (n-1)/n.
``count`` is one output chunk; each input holds n chunks.  In place, participant p's output is chunk
p of its own input.  torch.cuda.comm has none.
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
    td_op,
)


def _buffers(p, n, count, root, placement, empty):
    inp = empty(n * count)
    out = inp[p * count:(p + 1) * count] if placement == IN_PLACE else empty(count)
    return inp, out


def _expected(q, n, count, root, data):
    return data.reduced(count, q * count)


def _td_reduce_scatter(td):
    # torch >= 2.13 names the tensor form reduce_scatter_single and deprecates the old name.
    return getattr(td, "reduce_scatter_single", None) or td.reduce_scatter_tensor


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("reduce_scatter", lib.reduce_scatter, (list(a.inputs),),
                      {"op": a.op, "out": list(a.outputs)})


def _torch_distributed(td, a: Args) -> Invocation:
    return Invocation("reduce_scatter_tensor", _td_reduce_scatter(td), (a.outputs[0], a.inputs[0]),
                      {"op": td_op(td, a.op)})


def _gpucomm_dist(gd, a: Args) -> Invocation:
    return Invocation("reduce_scatter_tensor", gd.reduce_scatter_tensor, (a.outputs[0], a.inputs[0]),
                      {"op": a.op})


METHOD = Method(("outputs", "inputs", "op"), {"op": "sum"},
                doc=("Reduce the inputs; participant i's output gets chunk i (of n, along dim 0) of the "
                     "result."))

ROW = Collective(
    name="reduce_scatter", order=50, has_root=False, reduces=True, factor=Factor.N_MINUS_1_OVER_N,
    input_buffer=FULL, output_buffer=CHUNK, count_unit=CHUNK_COUNT, steps=lambda n: n - 1,
    placements=(OUT_OF_PLACE, IN_PLACE), summary="participant i holds chunk i of the elementwise reduction",
    buffers=_buffers, expected=_expected,
    calls=Calls(gpucomm_comm=_gpucomm_comm, torch_distributed=_torch_distributed, gpucomm_dist=_gpucomm_dist,
                communicator=method_call("reduce_scatter", METHOD),
                unavailable={"torch_cuda_comm": "torch.cuda.comm has no reduce_scatter"}),
    method=METHOD,
)
