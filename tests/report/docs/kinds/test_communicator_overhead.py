"""``communicator-overhead``: per op, the plain and prepared ratios, the misses and the added host time."""

from __future__ import annotations

import json

from gpucomm.report.docs.kinds import KINDS


def test_reports_misses_and_added_host_time(tmp_path):
    rows = [{"kind": "header", "command": "python benchmarks/communicator_overhead.py"}]
    for size, torch_us, plain_us, prep_us in [(16, 10.0, 13.5, 9.0), (1 << 20, 10.0, 11.0, 10.5)]:
        rows.append({"kind": "row", "op": "scatter", "size_bytes": size, "torch_us": torch_us, "plain_us": plain_us,
                     "prepared_us": prep_us, "plain_ratio": round(torch_us / plain_us, 3),
                     "prepared_ratio": round(torch_us / prep_us, 3)})
    path = tmp_path / "communicator-overhead_x_2026-12-03.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (line,) = [x for x in KINDS["communicator-overhead"].render(path, {}).splitlines() if x.startswith("| scatter")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "2"
    assert cells[3].startswith("0.952 / ")  # the prepared minimum
    assert cells[4] == "1 MiB: 0.952"  # the one prepared cell below 0.97
    assert cells[6] == "+3.50 at 16 B"
    assert cells[7] == "1 (16 B)"  # only 16 B adds more than 2 µs
