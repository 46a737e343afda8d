"""gather: the root ends with every input concatenated in participant order (never stacked).

Cost: the root receives n-1 chunks of S/n (ring_steps n-1, wire bytes (n-1)/n·S); busbw factor
(n-1)/n.  ``count`` is one chunk; only the root has an output (n chunks).  Out of place.
"""

from __future__ import annotations

from gpucomm.collectives.spec import (
    CHUNK,
    CHUNK_COUNT,
    OUT_OF_PLACE,
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
    return empty(count), (empty(n * count) if p == root else None)


def _expected(q, n, count, root, data):
    return data.cat([data.input(p, count) for p in range(n)]) if q == root else None


def _torch_cuda_comm(lib, a: Args) -> Invocation:
    return Invocation("gather", lib.gather, (list(a.inputs),), {"dim": 0, "out": a.outputs[a.root]})


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("gather", lib.gather, (list(a.inputs),), {"dim": 0, "out": a.outputs[a.root]})


def _slots(a: Args):
    return list(a.outputs[0].chunk(a.n)) if a.rank == a.root else None


def _distributed(lib, a: Args) -> Invocation:
    # torch.distributed and gpucomm.dist take the same arguments: one call serves both libraries
    return Invocation("gather", lib.gather, (a.inputs[0], _slots(a)), {"dst": a.global_root})


METHOD = Method(("outputs", "inputs", "root"), {"root": 0},
                doc=("The root's output gets every participant's input concatenated along dim 0; the other "
                     "participants' outputs are ignored and may be None."))

ROW = Collective(
    name="gather", order=70, has_root=True, reduces=False, factor=Factor.N_MINUS_1_OVER_N,
    input_buffer=CHUNK, output_buffer=ROOT, count_unit=CHUNK_COUNT, steps=lambda n: n - 1,
    placements=(OUT_OF_PLACE,), summary="the root holds all inputs concatenated in participant order",
    buffers=_buffers, expected=_expected,
    calls=Calls(torch_cuda_comm=_torch_cuda_comm, gpucomm_comm=_gpucomm_comm,
                torch_distributed=_distributed, gpucomm_dist=_distributed,
                communicator=method_call("gather", METHOD)),
    method=METHOD,
)
