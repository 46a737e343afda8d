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


def test_the_ratios_are_paired_per_round(monkeypatch):
    """Each ratio is the median over rounds of the round's torch / side, not the ratio of the medians: a round
    slowed by the machine slows both sides of the pair alike."""
    # an untimed round (torch, side), then three rounds whose order alternates: torch 1, 4, 8; side 4, 2, 4
    timed = iter([9.0, 9.0, 1.0, 4.0, 2.0, 4.0, 8.0, 4.0])
    monkeypatch.setattr(bench, "_round", lambda fn, calls, devs: 1.0 if calls == 3 else next(timed))
    ratios: dict[str, float] = {}
    med, calls = bench.interleaved({"torch": lambda: None, "side": lambda: None}, [], 3, 1.0, ratios)
    assert calls == 1000 and med == {"torch": 4.0, "side": 4.0}  # the medians alone would say 1.0
    assert ratios == {"side": 2.0}  # rounds: 1/4, 4/2, 8/4


def test_usage_errors_exit_2(tmp_path):
    assert bench.main(["--ops", "nosuch", "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


_SVC_PATH = _PATH.parent / "stack_vs_chain.py"
_svc_spec = importlib.util.spec_from_file_location("stack_vs_chain", _SVC_PATH)
svc = importlib.util.module_from_spec(_svc_spec)
_svc_spec.loader.exec_module(svc)


def test_stack_vs_chain_times_both_strategies_and_restores_the_limits(tmp_path):
    from gpucomm.comm import _reduce

    limits = [getattr(_reduce, name) for name in svc.LIMITS]
    code = svc.main(["--devices", "cpu,cpu", "--sizes", "64,1K", "--rounds", "1", "--round-ms", "1",
                     "--out", str(tmp_path), "--date", "D"])
    assert code == 0
    table = (tmp_path / "stack-vs-chain_cpu_D.txt").read_text().splitlines()
    assert table[0].startswith("# command: python ") and "stk/chn" in table[3]
    rows = [line.split() for line in table[4:]]
    assert [r[0] for r in rows] == ["reduce", "reduce", "all_reduce", "all_reduce"]
    assert all(len(r) == 12 and float(x) > 0 for r in rows for x in r[3:])  # "prep timed" and "timed x" too
    assert [getattr(_reduce, name) for name in svc.LIMITS] == limits and _reduce.TIME_ROUTES


def test_stack_vs_chain_strategies_take_their_routes(monkeypatch):
    # the chained limit must make a call chain, the stacked one stack: count torch.stack calls
    import torch

    from gpucomm.comm import _reduce
    from gpucomm.communicator import LocalCommunicator

    stacks = []
    real = torch.stack
    monkeypatch.setattr(torch, "stack", lambda *a, **k: stacks.append(1) or real(*a, **k))
    comm = LocalCommunicator(["cpu", "cpu"])
    ts = [torch.ones(4), torch.ones(4)]
    limits = [getattr(_reduce, name) for name in svc.LIMITS]
    try:
        for name, limit in svc.STRATEGIES.items():
            for call in (lambda: comm.all_reduce(ts, "sum"), lambda: comm.reduce(ts, 0, "sum")):
                stacks.clear()
                svc.with_limit(call, limit)()
                assert bool(stacks) == (name == "stacked"), name
    finally:
        for name, value in zip(svc.LIMITS, limits, strict=True):
            setattr(_reduce, name, value)


def test_stack_vs_chain_usage_errors_exit_2(tmp_path):
    assert svc.main(["--ops", "broadcast", "--out", str(tmp_path)]) == 2
    assert svc.main(["--sizes", "lots", "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


def test_gpu_overhead_script_fits_one_device_call_and_passes_options_its_scripts_take():
    # benchmarks/gpu/overhead.sh runs on the H200 only; here: its limits and the options it hands each script
    import re
    import shlex

    sh = (_PATH.parent / "gpu" / "overhead.sh").read_text()
    limits = [int(x) for x in re.findall(r"(?:^|&& )step (\d+) ", sh, re.M)]
    assert len(limits) == 4 and sum(limits) <= 280  # under 5 minutes with the processes' start
    gpu = sh[sh.index("\nelse\n"):sh.index("\nfi\n")]
    opts = {k: shlex.split(v) for k, v in re.findall(r'(\w+)="([^"]*)"', gpu)}
    assert bench.parser().parse_args(opts["CO"]).max_bytes == 32 << 20
    co, sv = bench.parser().parse_args(opts["CO"]), svc.parser().parse_args(opts["SV"])
    assert (co.rounds, co.round_ms, sv.rounds, sv.round_ms) == (24, 5.0, 12, 5.0)  # whole balanced cycles
    _cvt_spec = importlib.util.spec_from_file_location("comm_vs_torch", _PATH.parent / "comm_vs_torch.py")
    cvt = importlib.util.module_from_spec(_cvt_spec)
    sys.modules["comm_vs_torch"] = cvt  # its dataclasses look their module up
    _cvt_spec.loader.exec_module(cvt)
    assert cvt.parser().parse_args(opts["CT"]).budget_s < 85
    dist = (_PATH.parent / "dist_call_overhead.py").read_text()
    assert all(f'"{flag}"' in dist for flag in opts["DC"] if flag.startswith("--"))


def test_the_rounds_orders_balance_positions_and_what_precedes_each_side():
    """benchmarks/_orders.py (imported by the overhead benchmarks): over one cycle every side takes every
    position equally often and follows every other side equally often."""
    import collections

    orders = sys.modules["_orders"]
    for k in range(2, 7):
        rounds = [orders.order(k, r) for r in range(orders.cycle(k))]
        assert all(sorted(row) == list(range(k)) for row in rounds)
        positions = collections.Counter((i, side) for row in rounds for i, side in enumerate(row))
        pairs = collections.Counter(p for row in rounds for p in zip(row, row[1:], strict=False))
        assert len(set(positions.values())) == 1 and len(positions) == k * k
        assert len(set(pairs.values())) == 1 and len(pairs) == k * (k - 1), (k, pairs)
    assert orders.cycle(3) == 6 and orders.order(3, 0) == [0, 1, 2] and orders.order(3, 6) == [0, 1, 2]
