"""``gpucomm train`` end to end on CPU devices (in-process strategies; ddp is covered in test_compare)."""

from pathlib import Path

import pytest

from gpucomm.cli import main
from gpucomm.records import load
from gpucomm.train import strategies
from gpucomm.train.strategies import ReplicatedStrategy

HERE = Path(__file__).parent
BASE = ["train", "--devices", "cpu,cpu", "--steps", "3", "--warmup-steps", "1", "--global-batch", "4",
        "--no-report"]


def _train(tmp_path, *extra):
    return main([*BASE, "--out", str(tmp_path / "out"), *extra])


def test_writes_records_and_passes_assert_equal(tmp_path, capsys):
    rc = _train(tmp_path, "--model", "gpt-tiny", "--strategies", "single,dp,replicated", "--assert-equal")
    out = capsys.readouterr().out
    assert rc == 0, out
    results = load(tmp_path / "out")
    assert results.env[0].device_type == "cpu" and results.env[0].extra["model"] == "gpt-tiny"
    rows = {r.strategy: r for r in results.train}
    assert list(rows) == ["single", "dp", "replicated"]
    assert rows["dp"].status == "not-applicable"
    rep = rows["replicated"]
    assert rep.equal_to_single is True and rep.tolerance == 1e-5 and len(rep.losses) == 3
    assert rep.tokens_per_s == pytest.approx(rep.samples_per_s * 32)
    assert "CPU" in out and "replicated vs single: equal" in out


class _NoAllReduce(ReplicatedStrategy):
    name = "broken"

    def _launch(self, bucket):
        self._launched[bucket] = True


def test_assert_equal_fails_with_the_worst_step(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(strategies.STRATEGIES, "broken", _NoAllReduce)
    rc = _train(tmp_path, "--model", "mlp", "--strategies", "broken", "--assert-equal")
    out = capsys.readouterr().out
    assert rc == 1
    assert "broken vs single: DIFFERENT" in out and "worst loss step" in out
    assert "differs from replica 0" in out
    # without --assert-equal, replicas that differ are still a failed run
    assert _train(tmp_path, "--model", "mlp", "--strategies", "broken") == 1


@pytest.mark.parametrize("flags, message", [
    (["--strategies", "single,fsdp9"], "valid names are: single, dp, replicated, ddp"),
    (["--model", "gpt-9b"], "valid names are: gpt-tiny, gpt-124m, gpt-350m, mlp"),
    (["--model", "mlp", "--global-batch", "5"], "--global-batch 5 does not divide by the 2 devices"),
    (["--model", "mlp", "--warmup-steps", "3"], "leaves no timed step"),
    (["--model", "mlp", "--devices", "cpu,bogus"], "--devices[1]"),
    (["--model", "gpucomm_train_factory_example:raising_factory"], "the factory raised RuntimeError"),
    (["--model", "gpucomm_train_factory_example:wrong_factory"], "must return (model, batch_fn, loss_fn)"),
])
def test_usage_errors_exit_2(tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.syspath_prepend(str(HERE))
    assert _train(tmp_path, *flags) == 2
    assert message in capsys.readouterr().err


def test_user_factory_from_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    rc = _train(tmp_path, "--model", "gpucomm_train_factory_example:factory", "--strategies", "replicated",
                "--assert-equal")
    assert rc == 0, capsys.readouterr().out
    rows = load(tmp_path / "out").train
    assert [r.model for r in rows] == ["gpucomm_train_factory_example:factory"] * 2
    assert rows[1].seq_len is None and rows[1].tokens_per_s is None and rows[1].equal_to_single


def test_ddp_from_the_command_line(tmp_path, capsys):
    rc = _train(tmp_path, "--model", "mlp", "--strategies", "ddp", "--nproc", "2", "--assert-equal")
    out = capsys.readouterr().out
    assert rc == 0, out
    single, ddp = load(tmp_path / "out").train
    assert ddp.strategy == "ddp" and ddp.world_size == 2 and ddp.devices == ["cpu", "cpu"]
    assert ddp.equal_to_single and ddp.max_loss_rel_diff <= 1e-5
