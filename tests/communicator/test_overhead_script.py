"""benchmarks/communicator_overhead.py: a tiny CPU sweep writes its table and rows, with the command inside."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "communicator_overhead.py"
_spec = importlib.util.spec_from_file_location("communicator_overhead", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules["communicator_overhead"] = bench
_spec.loader.exec_module(bench)


def test_tiny_cpu_sweep_writes_table_and_rows(tmp_path, capsys):
    code = bench.main(["--devices", "cpu,cpu", "--max-bytes", "64", "--factor", "8", "--rounds", "1",
                       "--round-ms", "1", "--out", str(tmp_path), "--date", "D"])
    assert code == 0
    table = (tmp_path / "communicator-overhead_cpu_D.txt").read_text().splitlines()
    rows = [json.loads(x) for x in (tmp_path / "communicator-overhead_cpu_D.jsonl").read_text().splitlines()]
    assert table[0].startswith("# command: python ") and rows[0]["kind"] == "header"
    assert [r["op"] for r in rows[1:]] == [op for op in bench.OPS for _ in range(2)]  # sizes 8 and 64
    assert all(r["torch_us"] > 0 and r["plain_us"] > 0 and r["prepared_us"] > 0 for r in rows[1:])
    assert len(table) == 5 + len(rows) - 1
    assert "prep x" in capsys.readouterr().out


def test_usage_errors_exit_2(tmp_path):
    assert bench.main(["--ops", "nosuch", "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())
