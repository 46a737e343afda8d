"""``ceilings``: what was copied and its GB/s, one decimal."""

from __future__ import annotations

import json

from gpucomm.report.docs.kinds import KINDS


def test_one_row_per_copy_kind(tmp_path):
    path = tmp_path / "ceilings_x_2026-12-03.jsonl"
    rows = [{"what": "pinned -> cuda:0", "bytes": 1 << 30, "ms": 19.48, "gbps": 55.12},
            {"what": "cuda:0 -> cuda:1", "bytes": 1 << 30, "ms": 2.5, "gbps": 429.5}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert KINDS["ceilings"].render(path, {}).splitlines() == [
        "| what | GB/s |", "|---|---:|", "| pinned -> cuda:0 | 55.1 |", "| cuda:0 -> cuda:1 | 429.5 |"]
