"""``comm-vs-torch``: per op, the smallest ratio, the range from 64 MiB up, the points below 0.97, the check."""

from __future__ import annotations

import json

from gpucomm.report.docs.kinds import KINDS


def _row(op: str, size: int, ratio: float, correct: bool | None = True) -> dict:
    return {"kind": "comm_vs_torch", "op": op, "size_bytes": size, "ratio": ratio, "correct": correct}


def test_summarises_each_op(tmp_path):
    rows = [{"kind": "header", "command": "python benchmarks/comm_vs_torch.py"},
            _row("gather", 8, 0.95), _row("gather", 64 << 20, 1.5), _row("gather", 256 << 20, 1.75, None),
            _row("scatter", 8, 1.01, False)]
    path = tmp_path / "comm-vs-torch_x_2026-12-03.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = KINDS["comm-vs-torch"].render(path, {}).splitlines()
    assert lines[2] == "| gather | 3 | 0.950 at 8 B | 1.500–1.750 | 8 B: 0.950 | all 2 correct (1 not checked) |"
    assert lines[3] == "| scatter | 1 | 1.010 at 8 B | — | none | 1 WRONG |"
