"""``gpucomm train`` end to end on CPU devices: rows, usage errors, a failed run that touches nothing,
interrupts that keep rows and the report, and a parser that imports no torch."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpucomm.cli import main
from gpucomm.records import load
from gpucomm.train import strategies

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"
sys.path.insert(0, str(HERE))
from twin_strategy import TwinStrategy, UnreducedTwin  # noqa: E402

sys.path.remove(str(HERE))
BASE = ["train", "--devices", "cpu,cpu", "--steps", "3", "--warmup-steps", "1", "--global-batch", "4",
        "--no-report"]


@pytest.fixture
def twins(monkeypatch):
    for cls in (TwinStrategy, UnreducedTwin):
        monkeypatch.setitem(strategies.STRATEGIES, cls.name, cls)


def _train(tmp_path, *extra):
    return main([*BASE, "--out", str(tmp_path / "out"), *extra])


def test_writes_records_and_passes_assert_equal(tmp_path, capsys, twins):
    rc = _train(tmp_path, "--model", "gpt-tiny", "--strategies", "single,dp,twin", "--assert-equal")
    out = capsys.readouterr().out
    assert rc == 0, out
    results = load(tmp_path / "out")
    assert results.env[0].device_type == "cpu" and results.env[0].extra["model"] == "gpt-tiny"
    rows = {r.strategy: r for r in results.train}
    assert list(rows) == ["single", "dp", "twin"]
    assert rows["dp"].status == "not-applicable"
    twin = rows["twin"]
    assert twin.equal_to_single is True and twin.tolerance == 1e-5 and len(twin.losses) == 3
    assert twin.tokens_per_s == pytest.approx(twin.samples_per_s * 32)
    assert twin.host_ms_per_device is not None and rows["single"].host_breakdown_ms
    assert "CPU" in out and "twin vs single: equal" in out


def test_assert_equal_fails_with_the_worst_step(tmp_path, capsys, twins):
    rc = _train(tmp_path, "--model", "mlp", "--strategies", "twin-unreduced", "--assert-equal")
    out = capsys.readouterr().out
    assert rc == 1
    assert "twin-unreduced vs single: DIFFERENT" in out and "worst loss step" in out
    assert "differs in" in out
    # without --assert-equal, copies that differ are still a failed run
    assert _train(tmp_path, "--model", "mlp", "--strategies", "twin-unreduced") == 1


@pytest.mark.parametrize("flags, message", [
    (["--strategies", "single,fsdp9"], "valid names are: single, dp, replicated, ddp"),
    (["--model", "gpt-9b"], "valid names are: gpt-tiny, gpt-124m, gpt-350m, mlp"),
    (["--model", "mlp", "--global-batch", "5"], "--global-batch 5 does not divide by the 2 devices"),
    (["--model", "mlp", "--warmup-steps", "3"], "leaves no timed step"),
    (["--model", "mlp", "--devices", "cpu,bogus"], "--devices[1]"),
    (["--model", "gpucomm_train_factory_example:raising_factory"], "the factory raised RuntimeError"),
    (["--model", "gpucomm_train_factory_example:wrong_factory"], "must return (model, batch_fn, loss_fn)"),
    (["--model", "nosuch.module:fn"], "cannot import module 'nosuch.module'"),
    (["--model", "mlp", "--nproc", "0"], "--nproc: expected an integer >= 1"),
    (["--model", "mlp", "--nproc", "100000"], "--allow-many-procs"),
    (["--model", "mlp", "--graphs"], "--graphs"),
])
def test_usage_errors_exit_2_in_one_line_and_touch_nothing(tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.syspath_prepend(str(HERE))
    assert _train(tmp_path, *flags) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()  # a failed run creates nothing under --out


def test_gpus_that_do_not_exist_are_refused_like_bench_refuses_them(tmp_path, capsys, monkeypatch):
    """No silent switch to another model, no results directory: one line, exit 2."""
    from gpucomm.devices import cuda_device_count

    monkeypatch.chdir(tmp_path)
    devices = ",".join(f"cuda:{i}" for i in range(cuda_device_count() + 1))
    assert main(["train", "--devices", devices]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--devices: cuda:{cuda_device_count()} does not exist" in err, err
    assert not list(tmp_path.iterdir())
    assert main(["bench", "--devices", devices]) == 2
    assert "does not exist" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_argparse_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--steps", "many"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "--steps" in err


@pytest.mark.parametrize("value", ["0", "-1", "inf", "-inf", "nan", "soon"])
def test_bad_timeout_is_one_line_exit_2_and_writes_nothing(value, tmp_path, capsys):
    assert _train_exit(tmp_path, "--model", "mlp", f"--timeout={value}") == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_hung_ddp_rank_fails_its_row_after_the_timeout(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    started = time.monotonic()
    rc = _train(tmp_path, "--model", "gpucomm_train_factory_example:hang_in_rank1_factory", "--strategies", "ddp",
                "--timeout", "2")
    assert rc == 1 and time.monotonic() - started < 100  # start-up (up to 60 s) + 2 s, not 600 s
    rows = {r.strategy: r for r in load(tmp_path / "out").train}
    assert rows["single"].status == "ok" and rows["ddp"].status == "failed"
    assert "timeout=2 s" in rows["ddp"].note and "rank 1" in rows["ddp"].note, rows["ddp"].note


def _train_exit(tmp_path, *extra):
    try:
        return _train(tmp_path, *extra)
    except SystemExit as exc:  # argparse's own errors
        return exc.code


def test_out_under_a_regular_file_is_one_line_exit_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main([*BASE, "--model", "mlp", "--out", str(blocker / "results")]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a directory" in err and err.count("\n") == 1
    assert blocker.read_text() == "x"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, a file system no one can write to")
def test_out_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*BASE, "--model", "mlp", "--out", "/proc/gpucomm-nope"]) == 2  # even as root: tried, not guessed
    captured = capsys.readouterr()
    assert "cannot write results there" in captured.err and captured.err.count("\n") == 1
    assert captured.out == "" and list(tmp_path.iterdir()) == []


def test_out_naming_a_parent_of_runs_gets_a_new_train_dir_inside_it(tmp_path, capsys):
    first = tmp_path / "results" / "earlier"
    assert main([*BASE, "--model", "mlp", "--strategies", "single", "--no-report", "--out", str(first)]) == 0
    assert main([*BASE, "--model", "mlp", "--strategies", "single", "--no-report",
                 "--out", str(tmp_path / "results")]) == 0
    runs = sorted(p.name for p in (tmp_path / "results").iterdir())
    assert len(runs) == 2 and runs[0] == "earlier" and runs[1].startswith("train-")
    assert not (tmp_path / "results" / "records.jsonl").exists()
    assert "report.md" not in capsys.readouterr().out  # --no-report: nothing points to a report


def test_user_factory_from_the_command_line(tmp_path, capsys, monkeypatch, twins):
    monkeypatch.syspath_prepend(str(HERE))
    rc = _train(tmp_path, "--model", "gpucomm_train_factory_example:factory", "--strategies", "twin",
                "--assert-equal")
    assert rc == 0, capsys.readouterr().out
    rows = load(tmp_path / "out").train
    assert [r.model for r in rows] == ["gpucomm_train_factory_example:factory"] * 2
    assert rows[1].seq_len is None and rows[1].tokens_per_s is None and rows[1].equal_to_single


@pytest.mark.slow
def test_ddp_from_the_command_line(tmp_path, capsys):
    rc = _train(tmp_path, "--model", "mlp", "--strategies", "ddp", "--nproc", "2", "--assert-equal")
    out = capsys.readouterr().out
    assert rc == 0, out
    single, ddp = load(tmp_path / "out").train
    assert ddp.strategy == "ddp" and ddp.world_size == 2 and ddp.devices == ["cpu", "cpu"]
    assert ddp.equal_to_single and ddp.max_loss_rel_diff <= 1e-5
    assert ddp.host_ms_per_device is not None and ddp.host_ms_per_device == pytest.approx(ddp.host_ms_median)


def test_parser_imports_no_torch():
    code = ("import sys, argparse; from gpucomm.train import cli; p = argparse.ArgumentParser(); "
            "cli.add_parser(p.add_subparsers()); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert out.stdout.strip() == "False"


def test_every_option_has_help():
    import argparse

    from gpucomm.train import cli

    parser = cli.add_parser(argparse.ArgumentParser().add_subparsers())
    for action in parser._actions:
        assert action.help, action.option_strings


# ----- interrupts: subprocesses, signalled while a later strategy runs ------------------------------------
_SLOW = """
import os, pathlib, sys, time
sys.path.insert(0, {here!r})
from twin_strategy import TwinStrategy
from gpucomm.train import strategies

class Slow(TwinStrategy):
    name = "slow"
    def step(self, step, batch):
        pathlib.Path(os.environ["GPUCOMM_TEST_MARK"]).touch()
        time.sleep(0.3)
        return super().step(step, batch)

strategies.register(Slow)
from gpucomm.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _start(tmp_path, strategies_flag, model):
    mark = tmp_path / "mark"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), "GPUCOMM_TEST_MARK": str(mark),
           "OMP_NUM_THREADS": "1"}
    args = ["train", "--devices", "cpu,cpu", "--steps", "40", "--warmup-steps", "1", "--global-batch", "4",
            "--model", model, "--strategies", strategies_flag, "--out", str(tmp_path / "out")]
    proc = subprocess.Popen([sys.executable, "-c", _SLOW.format(here=str(HERE)), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the slow phase never started"
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("phase, strategies_flag, model", [
    ("single-process", "single,slow", "mlp"),
    ("ddp", "single,ddp", "gpucomm_train_factory_example:slow_in_ranks_factory"),
])
@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_keeps_finished_rows_and_writes_the_report(tmp_path, phase, strategies_flag, model, sig, code):
    proc = _start(tmp_path, strategies_flag, model)
    proc.send_signal(sig)
    time.sleep(0.2)
    proc.send_signal(sig)  # a second Ctrl-C (or TERM) during the clean-up
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, (out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    rows = load(tmp_path / "out").train
    assert rows[0].strategy == "single" and rows[0].status == "ok"
    assert f"interrupted ({sig.name}): 1 finished row kept" in out
    if phase == "ddp":  # its steps ran in other processes: nothing of it to keep
        assert len(rows) == 1
    elif len(rows) == 1:  # stopped in its first step: said so
        assert "slow was stopped before its first step finished" in out
    else:  # the strategy it stopped keeps its finished steps as a partial row
        assert [r.strategy for r in rows] == ["single", "slow"] and rows[1].status == "interrupted"
        assert 1 <= rows[1].steps == len(rows[1].losses) < 40 and rows[1].equal_to_single is None
        assert f"slow's {rows[1].steps} finished step" in out
    assert (tmp_path / "out" / "report.md").exists()


@pytest.mark.slow
def test_interrupt_in_the_first_strategy_keeps_its_finished_steps_as_a_partial_row(tmp_path):
    proc = _start(tmp_path, "single", "gpucomm_train_factory_example:slow_loss_factory")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err + out, err
    (row,) = load(tmp_path / "out").train
    assert row.strategy == "single" and row.status == "interrupted" and row.steps >= 2
    assert len(row.losses) == len(row.step_ms) == row.steps and row.samples_per_s is not None
    assert "interrupted after" in row.note
    assert f"interrupted (SIGINT): 0 finished rows kept; single's {row.steps} finished steps kept" in out


@pytest.mark.slow
def test_interrupt_before_any_strategy_says_so_and_writes_nothing(tmp_path):
    proc = _start(tmp_path, "single", "gpucomm_train_factory_example:slow_build_factory")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err + out and "interrupted before any strategy started; nothing written" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("width", [80, 120])
def test_output_fits_the_terminal_and_names_are_whole(tmp_path, capsys, monkeypatch, twins, width):
    monkeypatch.setenv("COLUMNS", str(width))
    rc = _train(tmp_path, "--model", "mlp", "--strategies", "single,dp,twin")
    out = capsys.readouterr().out
    assert rc == 0, out
    assert max(len(line) for line in out.splitlines()) <= width, out
    for name in ("single", "dp", "twin"):
        assert any(line.startswith(name) for line in out.splitlines()), out


# ----- what a person sees in a terminal ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 120])
def test_a_terminal_shows_live_progress_and_ends_with_the_answer(tmp_path, cols):
    pytest.importorskip("pyte")
    from gpucomm.testing.terminal import run_in_pty, screen_lines

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(SRC), OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "gpucomm", "train", "--model", "gpt-tiny", "--devices", "cpu,cpu", "--steps", "4",
            "--warmup-steps", "1", "--global-batch", "4", "--strategies", "single,replicated", "--no-report",
            "--out", str(tmp_path / "out")]
    code, data = run_in_pty(argv, cols, 40, env=env)
    lines = [line for line in screen_lines(data, cols, 40) if line.strip()]
    text = "\n".join(lines)
    assert code == 0, text
    assert "-:--:--" not in text  # no bar that looks hung
    for name in ("single", "replicated"):
        assert any(line.startswith(name) and "4/4 steps" in line for line in lines), text
    from gpucomm.report.findings import train_glance

    answer = train_glance(load(tmp_path / "out").train, cols)
    assert len(answer) == 2 and answer[0].startswith("Pick ") and answer[1].startswith("Equality: ")
    pick = max(i for i, line in enumerate(lines) if line.startswith("Pick "))
    # the answer, wrapped to the terminal, is the last thing on the screen, in at most five lines, nothing cut
    assert len(lines[pick:]) <= 5 and all(len(line) <= cols for line in lines), text
    assert " ".join(" ".join(lines[pick:]).split()) == " ".join(" ".join(answer).split()), text
    assert "gpt-tiny" in lines[pick] and "computed what single did" in answer[1]
