"""``all_to_all_v``: the uneven all_to_all of one process, as ``torch.distributed.all_to_all_single`` with splits."""

from __future__ import annotations

import operator
from typing import Any

import torch

from gpucomm._validate import describe, fail_type, fail_value
from gpucomm.comm import _kernels
from gpucomm.comm._checks import check_disjoint, check_tensors
from gpucomm.comm._exchange import all_to_all
from gpucomm.comm._prepare import bind, prepared_form

__all__ = ["all_to_all_v"]


def all_to_all_v(tensors: Any, split_sizes: Any, *, out: Any = None) -> list[torch.Tensor]:
    """Uneven personalised exchange along dim 0: participant j receives ``split_sizes[i][j]`` rows from each i.

    Semantics:
        * ``tensors[i]`` is participant i's input, on its device; it is cut along dim 0 into n pieces
          of ``split_sizes[i][0], …, split_sizes[i][n-1]`` rows (the row must sum to its dim 0; a
          piece may be empty), and piece j goes to participant j.
        * ``result[j]`` (on ``tensors[j]``'s device) is the pieces sent to j concatenated in
          participant order: dim 0 is ``sum(split_sizes[i][j] for i)``, other dims as the inputs'.
          This is ``torch.distributed.all_to_all_single(output, input, output_split_sizes,
          input_split_sizes)`` with every rank's ``input_split_sizes`` as one row of ``split_sizes``.
        * ``out`` (n tensors of those shapes) receives the result instead of new tensors; it must
          not overlap ``tensors``.  Inputs need one dtype; the exchange itself is :func:`all_to_all`.

    Returns:
        ``list[Tensor]``: new tensors (or ``out``).
    """
    ts, sizes, out = _checked(tensors, split_sizes, out)
    _exchange(ts, sizes, out)
    return list(out)


def _checked(tensors: Any, split_sizes: Any, out: Any) -> tuple[list[torch.Tensor], list[list[int]], list]:
    """:func:`all_to_all_v`'s checks: the inputs, the split sizes and the outputs (allocated when None)."""
    ts = check_tensors(tensors, "tensors")
    n = len(ts)
    sizes = _check_split_sizes(split_sizes, ts)
    rest = ts[0].shape[1:]
    for i, t in enumerate(ts):
        if t.dtype != ts[0].dtype or t.shape[1:] != rest:
            raise fail_value(f"tensors[{i}]", f"dtype {ts[0].dtype} and trailing shape {list(rest)} like tensors[0]",
                             describe(t), "every participant sends pieces of one kind")
    rows = [sum(sizes[i][j] for i in range(n)) for j in range(n)]
    if out is None:
        out = [torch.empty((rows[j], *rest), dtype=ts[0].dtype, device=ts[j].device) for j in range(n)]
    else:
        out = check_tensors(out, "out")
        if len(out) != n:
            raise fail_value("out", f"{n} tensors (one per participant)", f"{len(out)}")
        check_disjoint(out)
        for j, o in enumerate(out):
            if o.dim() == 0 or o.shape[0] != rows[j] or o.shape[1:] != rest:
                raise fail_value(f"out[{j}]", f"shape {[rows[j], *rest]} (the rows sent to participant {j})",
                                 describe(o))
            if any(_shares(o, t) for t in ts):
                raise fail_value(f"out[{j}]", "a tensor that does not overlap tensors", describe(o),
                                 "all_to_all_v works out of place; allocate separate outputs")
    return ts, sizes, list(out)


def _pieces(ts: list[torch.Tensor], sizes: list[list[int]], out: list) -> tuple[list, list]:
    """What every participant sends (``tensors[i]`` split by row i) and where it lands (``out[j]`` by column j)."""
    n = len(ts)
    return ([list(t.split(sizes[i])) for i, t in enumerate(ts)],
            [list(o.split([sizes[i][j] for i in range(n)])) for j, o in enumerate(out)])


def _exchange(ts: list[torch.Tensor], sizes: list[list[int]], out: list) -> None:
    sends, lands = _pieces(ts, sizes, out)
    all_to_all(sends, out=lands)


@prepared_form("all_to_all_v")
def _prepared(inputs, outputs, split_sizes):
    ts, sizes, out = _checked(inputs, split_sizes, outputs)
    sends, lands = _pieces(ts, sizes, out)
    run, _, _ = bind("all_to_all", sends, lands)  # all_to_all's own form: its route, decided once
    return run, out, out


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same storage (empty tensors hold no memory, whatever their null data pointers say)."""
    return (a.numel() > 0 and b.numel() > 0 and a.device == b.device
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def _check_split_sizes(split_sizes: Any, ts: list[torch.Tensor]) -> list[list[int]]:
    n = len(ts)
    if not isinstance(split_sizes, (list, tuple)):
        raise fail_type("split_sizes", f"a list of {n} lists of {n} ints", split_sizes)
    if len(split_sizes) != n:
        raise fail_value("split_sizes", f"{n} rows (one per participant)", f"{len(split_sizes)} rows")
    sizes = []
    for i, row in enumerate(split_sizes):
        if not isinstance(row, (list, tuple)) or len(row) != n:
            raise fail_value(f"split_sizes[{i}]", f"{n} sizes (one per receiving participant)", repr(row))
        for j, s in enumerate(row):
            if isinstance(s, bool) or not isinstance(s, int):
                raise fail_type(f"split_sizes[{i}][{j}]", "an int", s)
            if s < 0:
                raise fail_value(f"split_sizes[{i}][{j}]", "a non-negative row count", str(s))
        if ts[i].dim() == 0 or sum(row) != ts[i].shape[0]:
            raise fail_value(f"split_sizes[{i}]", f"sizes summing to tensors[{i}]'s dim 0 "
                             f"({ts[i].shape[0] if ts[i].dim() else 'a 0-dim tensor'})",
                             f"{list(row)} (sum {sum(row)})")
        sizes.append(list(map(operator.index, row)))
    return sizes


@_kernels.local_form("all_to_all_v")
def _local(held, inputs, outputs, root, op, extra):
    all_to_all_v(inputs, extra["split_sizes"], out=outputs)
