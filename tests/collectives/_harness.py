"""What every row test shares: inputs written as a formula, and a runner for a row's calls on CPU.

Participant p's input element i is :func:`x` ``(p, i) = 100·p + i + 1`` — small integers, exact in
float64, different for every participant and element, so a misplaced or missing element shows.
:class:`ListData` hands a row's ``expected`` those values as plain Python lists; the row tests compare
them with results they write out themselves.  :func:`run_call` performs a row's call through a real
library on CPU tensors and returns what each participant holds.
"""

from __future__ import annotations

import torch

from gpucomm.collectives.spec import Args, Data


def x(p: int, i: int) -> int:
    """Participant p's input element i."""
    return 100 * p + i + 1


class ListData(Data):
    """The inputs as lists; ``reduced`` sums (the only reduction the hand-written expectations use)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def input(self, p: int, numel: int, start: int = 0) -> list[int]:
        return [x(p, start + k) for k in range(numel)]

    def reduced(self, numel: int, start: int = 0) -> list[int]:
        return [sum(x(p, start + k) for p in range(self.n)) for k in range(numel)]

    def cat(self, parts) -> list[int]:
        return [v for part in parts for v in part]


def allocate(row, n: int, count: int, root: int, placement: str, participants=None, device="cpu"):
    """(inputs, outputs) of the held participants on ``device``: inputs hold x(p, ·), outputs -1."""
    inputs, outputs = [], []
    for p in participants if participants is not None else range(n):
        inp, out = row.buffers(p, n, count, root, placement,
                               lambda numel: torch.full((numel,), -1.0, dtype=torch.float64, device=device))
        if inp is not None:
            inp.copy_(torch.tensor([x(p, i) for i in range(inp.numel())], dtype=torch.float64))
        inputs.append(inp)
        outputs.append(out)
    return inputs, outputs


def run_call(row, library: str, lib, n: int, count: int, root: int, placement: str, *, rank: int = 0,
             participants=None, op=None, device="cpu") -> list:
    """Perform ``row``'s call for ``library`` on ``lib``; each held participant's output as a list (or None)."""
    inputs, outputs = allocate(row, n, count, root, placement, participants, device)
    devices = [torch.device(device)] * len(inputs)
    args = Args(inputs=inputs, outputs=outputs, n=n, root=root, op=op, rank=rank, devices=devices)
    inv = row.calls.get(library)(lib, args)
    returned = inv.bind()()
    if inv.returns_output:
        held = participants if participants is not None else range(n)
        outputs = [returned if p == root else None for p in held]
    return [None if o is None else [int(v) for v in o.tolist()] for o in outputs]


def check_local_calls(row, n: int, count: int = 3) -> list[str]:
    """Run the row's gpucomm.comm and Communicator calls on n CPU participants for every placement and root.

    Returns one line per participant whose output differs from the row's expected result.
    """
    import gpucomm.comm
    from gpucomm.collectives import ReduceOp
    from gpucomm.communicator import LocalCommunicator

    libs = {"gpucomm_comm": gpucomm.comm, "communicator": LocalCommunicator(["cpu"] * n)}
    placements = sorted({*row.placements, "out-of-place"})
    problems = []
    for library, lib in libs.items():
        if row.calls.get(library) is None:
            continue
        for placement in placements:
            if library == "communicator" and placement not in row.placements:
                continue  # the Communicator contract fixes its placements
            for root in (range(n) if row.has_root else (0,)):
                got = run_call(row, library, lib, n, count, root, placement,
                               op=ReduceOp.SUM if row.reduces else None)
                for q in range(n):
                    want = row.expected(q, n, count, root, ListData(n))
                    if want is not None and got[q] != want:
                        problems.append(f"{library} {placement} root={root} n={n}: participant {q} "
                                        f"holds {got[q]}, expected {want}")
    return problems
