"""``python -m gpucomm.dist._smoke``: check that gpucomm.dist works where torchrun or SLURM started us.

Usage::

    torchrun --nproc-per-node 2 -m gpucomm.dist._smoke                     # one machine
    torchrun --nnodes 2 --nproc-per-node 8 --node-rank $R \\
        --master-addr $HEAD --master-port 29500 -m gpucomm.dist._smoke --out /shared/smoke

Each rank starts the process group from the environment (:func:`gpucomm.dist.init`), runs an
all_reduce and an all_gather through :class:`gpucomm.ProcessGroupCommunicator`, checks the results
exactly, checks that :func:`gpucomm.dist.launch` refuses to nest a second job, prints one JSON line
and (with ``--out``) writes ``rank<R>.json``.  Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Sequence

import torch

__all__ = ["main"]


def _refuses_nested_launch() -> bool:
    from gpucomm.dist import launch

    try:
        launch(print, 2)
    except RuntimeError:
        return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpucomm.dist._smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="directory for rank<R>.json (default: print only)")
    parser.add_argument("--numel", type=int, default=1024, help="elements per rank (default 1024)")
    parser.add_argument("--backend", default=None, help="nccl or gloo (default: nccl where CUDA is available)")
    args = parser.parse_args(argv)

    from gpucomm import ProcessGroupCommunicator
    from gpucomm.dist import init

    with init(args.backend, timeout=120) as pg:
        comm = ProcessGroupCommunicator()
        t = [torch.full((args.numel,), float(pg.rank + 1), device=pg.device)]
        comm.all_reduce(t)
        gathered = [torch.empty(args.numel * pg.world_size, device=pg.device)]
        comm.all_gather(gathered, [torch.full((args.numel,), float(pg.rank), device=pg.device)])
        want_gather = torch.arange(pg.world_size, dtype=torch.float32).repeat_interleave(args.numel)
        record = {
            "rank": pg.rank, "world_size": pg.world_size, "local_rank": pg.local_rank,
            "backend": pg.backend, "source": pg.source, "device": str(pg.device),
            "host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid(),
            "all_reduce_ok": bool(torch.equal(t[0].cpu(), torch.full((args.numel,),
                                                                      pg.world_size * (pg.world_size + 1) / 2))),
            "all_gather_ok": bool(torch.equal(gathered[0].cpu(), want_gather)),
            "nested_launch_refused": _refuses_nested_launch(),
        }
        comm.barrier()
    ok = record["all_reduce_ok"] and record["all_gather_ok"] and record["nested_launch_refused"]
    print(json.dumps(record), flush=True)
    if args.out:
        with open(os.path.join(args.out, f"rank{record['rank']}.json"), "w") as f:
            json.dump(record, f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
