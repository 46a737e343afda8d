"""scatter: participant i ends with chunk i of the root's tensor.

Cost: the root sends n-1 chunks of S/n (ring_steps n-1, wire bytes (n-1)/n·S); busbw factor
(n-1)/n.  ``count`` is one chunk; only the root has an input (n chunks).  Out of place.
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
    return (empty(n * count) if p == root else None), empty(count)


def _expected(q, n, count, root, data):
    return data.input(root, count, q * count)


def _torch_cuda_comm(lib, a: Args) -> Invocation:
    return Invocation("scatter", lib.scatter, (a.inputs[a.root],), {"out": list(a.outputs)})


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("scatter", lib.scatter, (a.inputs[a.root],), {"out": list(a.outputs)})


def _chunks(a: Args):
    return list(a.inputs[0].chunk(a.n)) if a.rank == a.root else None


def _distributed(lib, a: Args) -> Invocation:
    # torch.distributed and gpucomm.dist take the same arguments: one call serves both libraries
    return Invocation("scatter", lib.scatter, (a.outputs[0], _chunks(a)), {"src": a.global_root})


METHOD = Method(("outputs", "inputs", "root"), {"root": 0},
                doc=("Participant i's output gets chunk i (of n, along dim 0) of the root's input; the other "
                     "participants' inputs are ignored and may be None."))

ROW = Collective(
    name="scatter", order=60, has_root=True, reduces=False, factor=Factor.N_MINUS_1_OVER_N,
    input_buffer=ROOT, output_buffer=CHUNK, count_unit=CHUNK_COUNT, steps=lambda n: n - 1,
    placements=(OUT_OF_PLACE,), summary="participant i holds chunk i of the root's tensor",
    buffers=_buffers, expected=_expected,
    calls=Calls(torch_cuda_comm=_torch_cuda_comm, gpucomm_comm=_gpucomm_comm,
                torch_distributed=_distributed, gpucomm_dist=_distributed,
                communicator=method_call("scatter", METHOD)),
    method=METHOD,
)
