"""Records: round trip, schema validation, and survival of an interrupted write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpucomm import records as R
from gpucomm.env import collect_env


def _bench(**over):
    row = dict(op="all_reduce", backend="gpucomm.comm", size=1024, count=256, dtype="float32", n=2, world_size=1,
               placement="in-place", device_type="cpu", timing="perf-counter", time_us_median=10.0,
               time_us_p99=12.5, algbw_gbps=0.1024, busbw_gbps=0.1024, wrong=0, iters=5, warmup=1)
    row.update(over)
    return R.BenchRecord(**row)


def test_round_trip(tmp_path):
    env = collect_env("cpu", extra={"iters": 5})
    with R.RecordWriter(tmp_path, env) as w:
        w.write(_bench())
        w.write(_bench(op="broadcast", root=0))
        w.write(R.TrainRecord(strategy="single", model="mlp", n_devices=1, world_size=1, device_type="cpu",
                              precision="fp32", global_batch=8, seq_len=None, steps=3, warmup_steps=1,
                              losses=[1.0, 0.5, 0.25]))
    rs = R.load(tmp_path)
    assert [b.op for b in rs.bench] == ["all_reduce", "broadcast"]
    assert rs.bench[1].root == 0
    assert rs.train[0].losses == [1.0, 0.5, 0.25]
    assert rs.env[0].extra == {"iters": 5} and rs.env[0].device_type == "cpu"
    assert rs.env[0].versions["gpucomm"]
    first = json.loads((tmp_path / R.RECORDS_FILE).read_text().splitlines()[0])
    assert first["kind"] == "env" and first["schema_version"] == R.SCHEMA_VERSION


def test_env_records_nccl_settings(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    env = collect_env("cpu")
    assert env.env_vars["NCCL_NVLS_ENABLE"] == "0"
    assert "UNRELATED_SECRET" not in env.env_vars


def test_truncated_last_line_is_skipped(tmp_path):
    with R.RecordWriter(tmp_path, collect_env("cpu")) as w:
        w.write(_bench())
    with open(tmp_path / R.RECORDS_FILE, "a") as f:
        f.write('{"kind": "bench", "op": "all_re')  # killed mid-write
    assert len(R.load(tmp_path).bench) == 1


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda r: r.pop("op"), "lacks the required field 'op'"),
    (lambda r: r.update(size="big"), "field 'size'"),
    (lambda r: r.update(wrong=True), "field 'wrong'"),
    (lambda r: r.update(bogus=1), "unknown fields"),
    (lambda r: r.update(kind="nope"), "unknown record kind"),
    (lambda r: r.update(schema_version=99), "schema_version 99"),
])
def test_validation_rejects_bad_rows(mutate, message):
    row = R.to_row(_bench())
    mutate(row)
    with pytest.raises(R.RecordError, match=message):
        R.validate_row(row)


def test_bad_line_in_middle_names_file_and_line(tmp_path):
    with R.RecordWriter(tmp_path, collect_env("cpu")) as w:
        w.write(_bench())
    path = tmp_path / R.RECORDS_FILE
    path.write_text(path.read_text() + "not json\n" + json.dumps(R.to_row(_bench())) + "\n")
    with pytest.raises(R.RecordError, match=r"records.jsonl:3: not JSON"):
        R.load(tmp_path)


def test_missing_and_empty_paths(tmp_path):
    with pytest.raises(R.RecordError, match="does not exist"):
        R.load(tmp_path / "nope")
    with pytest.raises(R.RecordError, match="holds no"):
        R.load(tmp_path)


def test_unwritable_directory_names_out(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="--out"):
        R.RecordWriter(blocker / "sub", collect_env("cpu"))


def test_nan_is_refused(tmp_path):
    with R.RecordWriter(tmp_path, collect_env("cpu")) as w, pytest.raises(ValueError):
        w.write(_bench(time_us_median=float("nan")))


def test_second_writer_on_the_same_directory_is_refused(tmp_path):
    with R.RecordWriter(tmp_path, collect_env("cpu")) as first:
        with pytest.raises(R.DirectoryBusyError, match="another gpucomm run"):
            R.RecordWriter(tmp_path, collect_env("cpu"))
        first.write(collect_env("cpu"))
    with R.RecordWriter(tmp_path, collect_env("cpu")):  # released on close
        pass
    assert len(R.load(tmp_path).env) == 3  # the refused writer wrote nothing


def test_lock_holds_across_processes(tmp_path):
    import subprocess
    import sys

    code = ("import sys, gpucomm.records as R\nfrom gpucomm.env import collect_env\n"
            "try:\n    R.RecordWriter(sys.argv[1], collect_env('cpu'))\n"
            "except R.DirectoryBusyError as e:\n    print('BUSY', e)\n")
    with R.RecordWriter(tmp_path, collect_env("cpu")):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                             timeout=120)
    assert out.stdout.startswith("BUSY"), out.stderr


def test_a_writer_leaves_nothing_but_records(tmp_path):
    with R.RecordWriter(tmp_path, collect_env("cpu")):
        pass
    assert [p.name for p in tmp_path.iterdir()] == [R.RECORDS_FILE]


def test_run_dirs_are_named_by_command_utc_time_and_pid(tmp_path, monkeypatch):
    import datetime as dt

    when = dt.datetime(2026, 12, 3, 14, 15, 2, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert R.run_dir_name("bench", when=when, pid=4711) == "bench-20261203-131502-4711"
    with pytest.raises(ValueError, match="command"):
        R.run_dir_name("../x")
    first, second = R.new_run_dir("train", tmp_path), R.new_run_dir("train", tmp_path)  # same second and pid
    assert first != second and first.is_dir() and second.is_dir()
    assert first.name.startswith("train-") and first.name.endswith(f"-{os.getpid()}")
    planned = R.new_run_dir("report", tmp_path / "later", create=False)
    assert not planned.exists() and not planned.parent.exists()
    monkeypatch.chdir(tmp_path)
    assert R.new_run_dir("advise").parent == R.RESULTS_ROOT


def test_out_is_the_run_dir_unless_it_is_a_parent_of_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fresh = R.run_dir_for("advise", None, create=False)
    assert fresh.parent == R.RESULTS_ROOT and fresh.name.startswith("advise-") and not fresh.exists()
    assert R.run_dir_for("bench", "").parent == R.RESULTS_ROOT  # --out without DIR; made now (create=True)
    assert R.run_dir_for("train", "mine", create=False) == Path("mine")  # a new directory: DIR itself
    run = tmp_path / "parent" / "bench-1"
    with R.RecordWriter(run, collect_env("cpu")):
        pass
    assert R.holds_records(run) and not R.holds_records(run.parent)
    assert R.run_dirs_below(tmp_path / "parent") == [run]
    inside = R.run_dir_for("advise", tmp_path / "parent", create=False)  # a parent of runs: a new run inside
    assert inside.parent == tmp_path / "parent" and inside.name.startswith("advise-") and not inside.exists()
    assert R.run_dir_for("bench", run) == run  # a run's own directory: written into (its lock guards it)
    (tmp_path / "empty").mkdir()
    assert R.run_dir_for("bench", tmp_path / "empty") == tmp_path / "empty"


def test_out_problem_is_checked_by_writing_and_leaves_nothing_behind(tmp_path):
    assert R.out_problem(tmp_path / "new" / "deeper") == ""
    assert list(tmp_path.iterdir()) == []  # made, written, and undone
    (tmp_path / "file").write_text("")
    assert "is a file" in R.out_problem(tmp_path / "file" / "sub")
    assert "is a file" in R.out_problem(tmp_path / "file")
    if Path("/proc/self").is_dir():  # a virtual file system refuses even root, whatever the permission bits say
        assert "cannot write results there" in R.out_problem("/proc/gpucomm-nope")


@pytest.mark.parametrize(("line", "what"), [
    (b"\x00\xff binary", "not UTF-8"),
    (b'{"kind": "env", "n": ' + b"7" * 5000 + b"}", "cannot be read"),
    (b"[" * 10_000 + b"]" * 10_000, "nested more than"),
    (b'{"a": "' + b"[" * 100 + b'"}', "unknown record kind"),  # brackets inside a string do not count
])
def test_hostile_lines_name_file_and_line(tmp_path, line, what):
    with R.RecordWriter(tmp_path, collect_env("cpu")):
        pass
    with open(tmp_path / R.RECORDS_FILE, "ab") as f:
        f.write(line + b"\n\n" + b'{"kind": "env"}\n')
    with pytest.raises(R.RecordError, match=what) as exc:
        R.load(tmp_path)
    assert f"{R.RECORDS_FILE}:2:" in str(exc.value)


def test_collect_env_lives_in_env_only():
    assert not hasattr(R, "collect_env")  # one home: gpucomm.env (records must not import env: no cycle)


def test_hidden_scratch_files_are_not_results(tmp_path):
    with R.RecordWriter(tmp_path, collect_env("cpu")):
        pass
    (tmp_path / ".process-group-rows.jsonl").write_text("not json at all\n{}\n")
    assert len(R.load(tmp_path).env) == 1
