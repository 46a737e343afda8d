"""all_to_all_v: the uneven all_to_all — participant i sends ``split_sizes[i][j]`` rows to participant j.

What ``torch.distributed.all_to_all_single(output, input, output_split_sizes, input_split_sizes)`` does
(MPI's ``Alltoallv``; the token dispatch of a mixture-of-experts layer): participant j's output is
the concatenation, in participant order, of the piece every participant sent it.

The row's splits are uneven on purpose, and one is empty: with ``count`` elements a unit, participant i
sends 2 units to i+1, none to i+2 and 1 unit to everyone else (n ≥ 3; n = 2: 0 to itself, 2 to its
peer), so every input and every output still holds n units and ``size`` means what it means for
all_to_all.  Cost: n-1 steps; for n ≥ 3 each participant sends (n-1) units of its n, wire bytes
(n-1)/n·S and busbw factor (n-1)/n exactly as all_to_all (for n = 2 it sends all of S).  Out of place;
torch.cuda.comm has no uneven all_to_all.  The Communicator's ``all_to_all_v(outputs, inputs,
split_sizes)`` takes the whole n x n matrix (every process passes the same one: its row is what a
participant sends, its column what it receives).
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
)


def split_sizes(n: int, count: int) -> list[list[int]]:
    """``[i][j]``: elements participant i sends to participant j (every row and column sums to n·count)."""
    if n == 1:
        return [[count]]
    units = [[1] * n for _ in range(n)]
    for i in range(n):
        units[i][(i + 1) % n] += 1
        units[i][(i + 2) % n] -= 1
    return [[u * count for u in row] for row in units]


def _buffers(p, n, count, root, placement, empty):
    return empty(n * count), empty(n * count)


def _expected(q, n, count, root, data):
    s = split_sizes(n, count)
    return data.cat([data.input(p, s[p][q], sum(s[p][:q])) for p in range(n)])


def _splits(a: Args) -> list[list[int]]:
    """The Communicator caller's matrix, or (bench) the row's uneven one for these buffers."""
    given = a.extra.get("split_sizes")
    return given if given is not None else split_sizes(a.n, a.inputs[0].numel() // a.n)


def _communicator(comm, a: Args) -> Invocation:
    return Invocation("all_to_all_v", comm.all_to_all_v, (a.outputs, a.inputs, _splits(a)))


METHOD = Method(("outputs", "inputs", "split_sizes"), {},
                doc=("Uneven all_to_all along dim 0: participant i sends split_sizes[i][j] rows of its input to "
                     "participant j, whose output is the pieces it receives, in participant order."))


def _gpucomm_comm(lib, a: Args) -> Invocation:
    return Invocation("all_to_all_v", lib.all_to_all_v, (list(a.inputs), _splits(a)), {"out": list(a.outputs)})


def _distributed(lib, a: Args) -> Invocation:
    # torch.distributed and gpucomm.dist take the same arguments: one call serves both libraries
    s = _splits(a)
    return Invocation("all_to_all_single", lib.all_to_all_single,
                      (a.outputs[0], a.inputs[0], [row[a.rank] for row in s], s[a.rank]))


ROW = Collective(
    name="all_to_all_v", order=85, has_root=False, reduces=False, factor=Factor.N_MINUS_1_OVER_N,
    input_buffer=FULL, output_buffer=FULL, count_unit=CHUNK_COUNT, steps=lambda n: n - 1,
    placements=(OUT_OF_PLACE,), summary="participant j holds, in participant order, the piece each sent it",
    buffers=_buffers, expected=_expected,
    calls=Calls(gpucomm_comm=_gpucomm_comm, torch_distributed=_distributed, gpucomm_dist=_distributed,
                communicator=_communicator, unavailable={"torch_cuda_comm": "torch.cuda.comm has no all_to_all"}),
    method=METHOD,
)
