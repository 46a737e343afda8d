"""send_recv: a ring shift; participant i ends with the input of participant i-1 (mod n).

Cost: one step of S (ring_steps 1, wire bytes S); busbw factor 1.  With one participant it is a local
copy (torch.distributed refuses self-sends).  Out of place; torch.cuda.comm has none.
"""

from __future__ import annotations

from gpucomm.collectives.spec import (
    BUFFER,
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
    return empty(count), empty(count)


def _expected(q, n, count, root, data):
    return data.input((q - 1) % n, count)


def _td_send_recv(td, out, inp, rank: int, n: int) -> None:
    """One ``batch_isend_irecv`` of a send to rank+1 and a receive from rank-1, so no rank waits on another."""
    if n == 1:
        out.copy_(inp)
        return
    ops = [td.P2POp(td.isend, inp, (rank + 1) % n), td.P2POp(td.irecv, out, (rank - 1) % n)]
    for work in td.batch_isend_irecv(ops):
        work.wait()


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("send_recv", lib.send_recv, (list(a.inputs),), {"out": list(a.outputs)})


def _torch_distributed(td, a: Args) -> Invocation:
    return Invocation("send_recv", _td_send_recv, (td, a.outputs[0], a.inputs[0], a.rank, a.n))


def _gpucomm_dist(gd, a: Args) -> Invocation:
    return Invocation("send_recv", gd.send_recv, (a.outputs[0], a.inputs[0]))


METHOD = Method(("outputs", "inputs"), {},
                doc=("Each participant i sends its input to (i+1) mod n and receives into its output from "
                     "(i-1) mod n."))

ROW = Collective(
    name="send_recv", order=90, has_root=False, reduces=False, factor=Factor.ONE, input_buffer=FULL,
    output_buffer=FULL, count_unit=BUFFER, steps=lambda n: 1, placements=(OUT_OF_PLACE,),
    summary="participant i holds the input of participant i-1 (mod n)",
    buffers=_buffers, expected=_expected,
    calls=Calls(gpucomm_comm=_gpucomm_comm, torch_distributed=_torch_distributed, gpucomm_dist=_gpucomm_dist,
                communicator=method_call("send_recv", METHOD),
                unavailable={"torch_cuda_comm": "torch.cuda.comm has no send/recv (one process)"},
                notes={"torch_distributed": "batch_isend_irecv ring shift; a world of one copies locally "
                                            "(torch refuses self-sends)"}),
    method=METHOD,
)
