"""The shipped compute profile of a ``--hardware``, where this machine has its GPU: what the benchmarks that
time the advisor's host probe again (``host_probe.py``, ``host_adjacent.py``) need before anything runs."""

from __future__ import annotations

import sys

import torch

__all__ = ["shipped_here"]


def shipped_here(hardware: str, prog: str):
    """The profile shipped for ``hardware`` when this machine's CUDA device is its GPU; else ``None``, with the one
    line that says so on stderr (the caller exits 2)."""
    from gpucomm.advisor.compute import source

    name = source.SHIPPED.get(hardware)
    prof = source.shipped(name) if name else None
    if prof is None or not torch.cuda.is_available() or torch.cuda.get_device_name() != prof.gpu:
        print(f"{prog}: error: needs a GPU of the profile shipped for --hardware {hardware} "
              f"({prof.gpu if prof else 'none ships'})", file=sys.stderr)
        return None
    return prof
