"""``gpucomm bench`` through its CLI: usage errors, a broken backend, a CPU run end to end, interruption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench_doubles import BrokenBackend

from gpucomm import collectives, records
from gpucomm.cli import main
from gpucomm.devices import cuda_device_count

NO_GPU = cuda_device_count() == 0


def _main(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors
        return exc.code


def _rows(out: Path) -> list[dict]:
    lines = (out / records.RECORDS_FILE).read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    for row in rows:
        records.validate_row(row)
    assert rows[0]["kind"] == "env"
    return rows[1:]


@pytest.mark.parametrize(("flags", "needle"), [
    (["-b", "-8"], "--minbytes"),
    (["-b", "1M", "-e", "1K"], "--minbytes"),
    (["-e", "12Q"], "--maxbytes"),
    (["-f", "1"], "--stepfactor"),
    (["--ops", "allreduce"], "allreduce"),
    (["--backends", "nccl"], "--backends"),
    (["-d", "float8"], "--dtype"),
    (["-o", "xor"], "--op"),
    (["-n", "0"], "--iters"),
    (["-n", "many"], "-n/--iters"),
    (["-c", "-1"], "--check"),
    (["-r", "9"], "--root"),
    (["--devices", "cuda:zero"], "--devices"),
    (["--backends", "gpucomm.comm", "--ops", "all_gather", "-b", "8", "-e", "8", "--devices", "cpu,cpu,cpu"],
     "nothing to measure"),
    pytest.param(["--backends", "torch.cuda.comm"], "CUDA", marks=pytest.mark.skipif(not NO_GPU, reason="CPU only")),
    pytest.param(["--cuda-graph"], "--cuda-graph", marks=pytest.mark.skipif(not NO_GPU, reason="CPU only")),
])
def test_usage_errors_exit_2_with_one_line(flags, needle, tmp_path, capsys):
    assert _main(["bench", *flags, "--out", str(tmp_path / "out")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert needle in err[0]
    assert not (tmp_path / "out").exists()  # flags are checked before the results directory is made


def test_unwritable_out_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert _main(["bench", "--out", str(blocker / "sub")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "--out" in err[0]


def test_broken_backend_is_shown_wrong_and_exits_1(tmp_path, monkeypatch, capsys):
    from gpucomm.bench import adapters

    monkeypatch.setitem(adapters.ADAPTERS, "gpucomm.comm", BrokenBackend)
    assert BrokenBackend.spec.name == "gpucomm.comm"
    out = tmp_path / "run"
    rc = _main(["bench", "--backends", "gpucomm.comm", "--ops", "all_reduce,broadcast", "--devices", "cpu,cpu",
                "-e", "256", "-n", "2", "-w", "0", "--out", str(out)])
    assert rc == 1
    rows = _rows(out)
    wrong = {r["op"]: r["wrong"] for r in rows if r["wrong"]}
    assert set(wrong) == {"all_reduce"} and all(r["wrong"] > 0 for r in rows if r["op"] == "all_reduce")
    assert all(r["wrong"] == 0 for r in rows if r["op"] == "broadcast")
    assert "WRONG" in capsys.readouterr().out
    assert (out / "report.md").exists()


def _bench(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "gpucomm", "bench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, **kw)


@pytest.mark.slow
@pytest.mark.skipif(not NO_GPU, reason="the CPU end-to-end run; GPU machines run test_gpu_bench")
def test_cpu_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    proc = _bench(["-e", "4K", "-f", "8", "-n", "3", "-w", "1", "--out", str(out)])
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, text
    assert "CPU numbers" in text
    rows = _rows(out)
    assert {r["backend"] for r in rows} == {"gpucomm.comm", "torch.distributed", "gpucomm.dist"}
    assert {r["op"] for r in rows} == set(collectives.names())
    assert all(r["wrong"] == 0 for r in rows)
    assert all(r["device_type"] == "cpu" and r["timing"] == "perf-counter" for r in rows)
    dist_rows = [r for r in rows if r["backend"] == "gpucomm.dist"]
    assert dist_rows and all(r["baseline"] == "torch.distributed" and r["speedup"] > 0 for r in dist_rows)
    assert {r["world_size"] for r in rows if r["backend"] == "torch.distributed"} == {2}
    env = json.loads((out / records.RECORDS_FILE).read_text().splitlines()[0])
    assert env["device_type"] == "cpu" and env["extra"]["iters"] == 3
    assert (out / "report.md").exists() and (out / "report.html").exists()
    assert not (out / ".process-group-rows.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_keeps_rows_and_builds_report(sig, tmp_path):
    out = tmp_path / "run"
    proc = _bench(["--backends", "gpucomm.comm", "--devices", "cpu,cpu", "-b", "1K", "-e", "64M", "-f", "2",
                   "-n", "20", "--out", str(out)])
    path = out / records.RECORDS_FILE
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 4):
        time.sleep(0.1)
    seen = len(path.read_text().splitlines()) - 1
    assert seen >= 3, "the run produced no rows to keep"
    proc.send_signal(sig)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    assert "interrupted" in text
    rows = records.load(out).bench
    assert len(rows) >= seen
    assert len(rows) < 15 * 9  # it really stopped early
    assert (out / "report.md").exists()


@pytest.mark.slow
def test_interrupt_during_process_group_phase_keeps_streamed_rows(tmp_path):
    out = tmp_path / "run"
    proc = _bench(["--backends", "torch.distributed", "--nproc", "2", "--devices", "cpu,cpu", "-b", "64K",
                   "-e", "256M", "-f", "2", "-n", "20", "--out", str(out)])
    path = out / records.RECORDS_FILE
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 4):
        time.sleep(0.1)
    seen = len(path.read_text().splitlines()) - 1
    assert seen >= 3, "the workers streamed no rows"
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    rows = records.load(out).bench
    assert len(rows) >= seen and all(r.backend == "torch.distributed" and r.world_size == 2 for r in rows)
    assert (out / "report.md").exists()
    assert not (out / ".process-group-rows.jsonl").exists()


@pytest.mark.slow
def test_a_second_interrupt_cannot_stop_the_report(tmp_path):
    out = tmp_path / "run"
    proc = _bench(["--backends", "gpucomm.comm", "--devices", "cpu,cpu", "-b", "1K", "-e", "64M", "-f", "2",
                   "-n", "20", "--out", str(out)])
    path = out / records.RECORDS_FILE
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 4):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # the report is being written now
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert (out / "report.md").exists() and records.load(out).bench


# ----- buffers that cannot fit: refused before any work -----------------------------------------------------
_TOO_BIG = [["-e", "100G"], ["-b", "8G", "-e", "8G", "--ops", "all_gather", "--backends", "gpucomm.comm"]]


@pytest.mark.parametrize("flags", _TOO_BIG)
def test_buffers_beyond_the_host_memory_are_one_line_exit_2_and_write_nothing(flags, tmp_path, capsys,
                                                                              monkeypatch):
    from gpucomm.bench import memory

    monkeypatch.setattr(memory, "available_bytes", lambda place: 23 << 30)  # the 23 GiB machine of issue 19
    monkeypatch.chdir(tmp_path)
    assert _main(["bench", *flags, "--devices", "cpu,cpu,cpu,cpu"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "needs" in err[0] and "of host memory" in err[0], err
    assert "but 23.0 GiB is available" in err[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(not NO_GPU, reason="the issue's commands as typed, on a machine without a GPU")
@pytest.mark.parametrize("flags", _TOO_BIG)
def test_the_issue_commands_are_refused_as_typed(flags, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpucomm", "bench", *flags], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.count("\n") == 1 and "GiB of host memory" in proc.stderr
    assert not list(tmp_path.iterdir())


# ----- probes: bad numbers, process counts, result directories ------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1", "inf", "-inf", "nan", "soon"])
def test_bad_timeout_is_a_usage_error_that_writes_nothing(value, tmp_path, capsys):
    out = tmp_path / "out"
    assert _main(["bench", "--timeout", value, "--devices", "cpu,cpu", "--out", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "--timeout" in err[0], err
    assert not out.exists()


def test_nproc_zero_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert _main(["bench", "--nproc", "0", "--devices", "cpu,cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--nproc" in err[0] and "at least 1" in err[0]
    assert not out.exists()


def test_nproc_beyond_the_machine_needs_the_expert_flag(tmp_path, capsys, monkeypatch):
    from gpucomm.bench import cli as bench_cli

    limit, _ = bench_cli.nproc_limit()
    out = tmp_path / "out"
    assert _main(["bench", "--nproc", str(limit + 1), "--devices", "cpu,cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--nproc" in err[0] and "--oversubscribe" in err[0], err
    assert not out.exists()
    # with the flag the configuration is accepted (nothing is started here)
    parser = _parser()
    args = parser.parse_args(["bench", "--nproc", str(limit + 1), "--oversubscribe", "--devices", "cpu,cpu"])
    cfg, _ = bench_cli.config_from_args(args)
    assert cfg.nproc == limit + 1


def _parser():
    import argparse

    from gpucomm.bench import cli as bench_cli

    parser = argparse.ArgumentParser()
    bench_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser


def test_default_out_is_new_for_every_run_even_in_one_second(tmp_path, monkeypatch):
    from gpucomm.bench import cli as bench_cli

    monkeypatch.chdir(tmp_path)
    first, second = bench_cli._out_dir(None), bench_cli._out_dir(None)  # same second, same pid
    assert first != second and first.parent == second.parent == Path("gpucomm-results")
    assert str(os.getpid()) in first.name
    assert sorted(p.name for p in Path("gpucomm-results").iterdir()) == sorted([first.name, second.name])


def test_out_naming_a_parent_of_runs_gets_a_new_bench_dir_inside_it(tmp_path, monkeypatch):
    from gpucomm.bench import cli as bench_cli
    from gpucomm.env import collect_env
    from gpucomm.records import RecordWriter

    monkeypatch.chdir(tmp_path)
    with RecordWriter(tmp_path / "gpucomm-results" / "train-1", collect_env("cpu")):
        pass
    inside = bench_cli._out_dir("gpucomm-results")  # writing into the parent would merge every run below it
    assert inside.parent == Path("gpucomm-results") and inside.name.startswith("bench-") and inside.is_dir()
    assert bench_cli._out_dir("mine") == Path("mine") and Path("mine").is_dir()
    assert [p.name for p in inside.iterdir()] == []  # the write test leaves nothing


def test_out_held_by_a_live_run_is_refused(tmp_path, capsys):
    out = tmp_path / "held"
    env = records.EnvRecord(created="now", command=["test"], versions={}, host={}, devices=[], device_type="cpu",
                            env_vars={})
    with records.RecordWriter(out, env):
        before = (out / records.RECORDS_FILE).read_text()
        rc = _main(["bench", "--backends", "gpucomm.comm", "--devices", "cpu,cpu", "--ops", "all_reduce",
                    "-e", "64", "-n", "1", "-w", "0", "--out", str(out)])
        assert rc == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and "another gpucomm run" in err[0], err
        assert (out / records.RECORDS_FILE).read_text() == before  # not a byte added


def test_bench_help_imports_no_torch():
    code = ("import argparse, sys\n"
            "from gpucomm.bench import cli\n"
            "p = argparse.ArgumentParser(); cli.add_parser(p.add_subparsers())\n"
            "p.format_help()\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stderr


def test_every_bench_option_has_help():
    parser = _parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices["bench"]
    missing = [a.option_strings for a in sub._actions if a.option_strings and not a.help]
    assert missing == []
