"""all_to_all: chunk j of participant i's input lands as chunk i of participant j's output.

Cost: n-1 steps of S/n (ring_steps n-1, wire bytes (n-1)/n·S); busbw factor (n-1)/n.  ``count`` is
one chunk; input and output hold n chunks each.  Out of place; torch.cuda.comm has none.
"""

from __future__ import annotations

from gpucomm.collectives.spec import (
    CHUNK_COUNT,
    FULL,
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
    return empty(n * count), empty(n * count)


def _expected(q, n, count, root, data):
    return data.cat([data.input(p, count, q * count) for p in range(n)])


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("all_to_all", lib.all_to_all, ([list(t.chunk(a.n)) for t in a.inputs],),
                      {"out": [list(t.chunk(a.n)) for t in a.outputs]})


def _distributed(lib, a: Args) -> Invocation:
    # torch.distributed and gpucomm.dist take the same arguments: one call serves both libraries
    return Invocation("all_to_all_single", lib.all_to_all_single, (a.outputs[0], a.inputs[0]))


METHOD = Method(("outputs", "inputs"), {},
                doc=("Chunk j (of n, along dim 0) of participant i's input lands as chunk i of participant j's "
                     "output."))

ROW = Collective(
    name="all_to_all", order=80, has_root=False, reduces=False, factor=Factor.N_MINUS_1_OVER_N,
    input_buffer=FULL, output_buffer=FULL, count_unit=CHUNK_COUNT, steps=lambda n: n - 1,
    placements=(OUT_OF_PLACE,), summary="participant j holds chunk j of every input, in participant order",
    buffers=_buffers, expected=_expected,
    calls=Calls(gpucomm_comm=_gpucomm_comm, torch_distributed=_distributed, gpucomm_dist=_distributed,
                communicator=method_call("all_to_all", METHOD),
                unavailable={"torch_cuda_comm": "torch.cuda.comm has no all_to_all"}),
    method=METHOD,
)
