"""Report fixtures: synthetic result directories, each report built once per session (plots cost ~0.3 s)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# tests run with --import-mode=importlib, so the helper module is loaded by path.
_spec = importlib.util.spec_from_file_location("report_records", Path(__file__).with_name("_records.py"))
records = importlib.util.module_from_spec(_spec)
sys.modules["report_records"] = records
_spec.loader.exec_module(records)

from report_records import MALICIOUS  # noqa: E402


@pytest.fixture(scope="session")
def gpu_dir(tmp_path_factory) -> Path:
    """A CUDA run with bench (one wrong row), train, advice and scale records; a <script> command line."""
    rows = records.bench_sweep()
    rows.append(records.bench("all_reduce", "gpucomm.comm", 1 << 12, wrong=5, speedup=0.8,
                              baseline="torch.cuda.comm", time_us=123.456))
    rows += records.train_rows() + records.advice_rows() + records.scale_rows()
    env = records.env(command=["gpucomm", "bench", "--tag", MALICIOUS])
    return records.write(tmp_path_factory.mktemp("gpu"), env, rows)


@pytest.fixture(scope="session")
def cpu_dir(tmp_path_factory) -> Path:
    """A CPU bench run on another host and torch version, all rows correct."""
    env = records.env(hostname="hostB", device=None, device_type="cpu", torch="2.13.0",
                      created="2026-12-01T09:00:00+00:00")
    rows = [r for r in records.bench_sweep(device_type="cpu") if r.op == "all_reduce"]
    for r in rows:  # run 2 is twice as slow as run 1 at every point
        r.time_us_median *= 2
    return records.write(tmp_path_factory.mktemp("cpu"), env, rows)


@pytest.fixture(scope="session")
def gpu_report(gpu_dir) -> dict[str, Path]:
    from gpucomm.report import build

    return build(gpu_dir)


@pytest.fixture(scope="session")
def compare_report(gpu_dir, cpu_dir, tmp_path_factory) -> dict[str, Path]:
    from gpucomm.report import build

    return build([gpu_dir, cpu_dir], tmp_path_factory.mktemp("compare"))


@pytest.fixture(scope="session")
def cpu_report(cpu_dir, tmp_path_factory) -> dict[str, Path]:
    from gpucomm.report import build

    return build(cpu_dir, tmp_path_factory.mktemp("cpu_report"))
