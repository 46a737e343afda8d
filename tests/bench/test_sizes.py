"""K/M/G size parsing and the geometric sweep (nccl-tests -b -e -f)."""

from __future__ import annotations

import pytest

from gpucomm.bench.sizes import format_size, parse_size, size_sweep


@pytest.mark.parametrize(("text", "nbytes"), [
    ("8", 8), ("64K", 65536), ("64k", 65536), ("32M", 32 << 20), ("1G", 1 << 30), ("1MiB", 1 << 20),
    ("2KB", 2048), ("1.5K", 1536), (" 4 ", 4), ("0", 0), (1024, 1024),
])
def test_parse_size(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["-1", "-4K", "abc", "1X", "1.3", "", "K", True])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="--minbytes"):
        parse_size(text, "--minbytes")


def test_sweep_is_geometric_and_ends_at_max():
    assert size_sweep(8, 1024, 4) == [8, 32, 128, 512, 1024]
    assert size_sweep(1 << 10, 1 << 20, 32) == [1024, 32768, 1048576]
    assert size_sweep(64, 64, 2) == [64]


def test_sweep_from_zero():
    assert size_sweep(0, 4, 2) == [0, 1, 2, 4]


@pytest.mark.parametrize(("args", "match"), [((2048, 1024, 2), "larger than"), ((8, 64, 1), "stepfactor"),
                                             ((-8, 64, 2), "non-negative")])
def test_sweep_rejects(args, match):
    with pytest.raises(ValueError, match=match):
        size_sweep(*args)


def test_format_size():
    assert [format_size(x) for x in (8, 1024, 3 << 20, 1 << 30, 1500)] == ["8 B", "1 KiB", "3 MiB", "1 GiB", "1500 B"]
