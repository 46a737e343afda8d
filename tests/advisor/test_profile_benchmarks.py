"""The benchmark scripts around a compute profile: re-timing its whole steps in one run, and pooling
re-predictions of single-GPU runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from gpucomm.advisor.compute import measure, profile
from gpucomm.advisor.compute import shapes as sh

_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _inductor_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # per-op checkpointing sets it


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, _ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _cpu_profile():
    la = sh.LayerShape(family="gpt", hidden=32, heads=2, kv_heads=2, ffn=64, seq=16, mb=1)
    grid = sh.Grid(layers=(la,), attention=(sh.AttentionShape(head_dim=16, heads=2, seq=16),),
                   embeddings=(sh.EmbeddingShape(vocab=64, hidden=32, seq=16, mb=1),),
                   heads=(sh.HeadShape(family="gpt", vocab=64, hidden=32, seq=16, mb=1),),
                   optimizers=(sh.OptimizerShape(width=32, layers=1),),
                   steps=(sh.StepShape(layer=la, vocab=64, layers=2), sh.StepShape(layer=la, vocab=64, layers=4)))
    return measure.measure(grid, torch.device("cpu"), precision="fp32", grid_name="t", progress=lambda _: None)


def test_remeasure_steps_replaces_every_step_and_keeps_every_other_point(tmp_path):
    base = _cpu_profile()
    src, out = tmp_path / "p.json", tmp_path / "q.json"
    for r in base.points["step"]:
        r["seconds"] = 123.0  # what the file holds is not what a new run measures
    profile.save(base, src)
    assert _script("remeasure_steps").main([str(src), "--out", str(out), "--rounds", "3"]) == 0
    new = json.loads(out.read_text())
    old = json.loads(src.read_text())
    assert [r["layers"] for r in new["points"]["step"]] == [2, 4]
    assert all(r["seconds"] < 1.0 for r in new["points"]["step"])
    assert {k: v for k, v in new["points"].items() if k != "step"} == {k: v for k, v in old["points"].items()
                                                                       if k != "step"}
    for r, was in zip(new["points"]["step"], old["points"]["step"], strict=True):  # only the times move
        assert {k: v for k, v in r.items() if k != "seconds"} == {k: v for k, v in was.items() if k != "seconds"}
    run = new["device"]["merges"][-1]
    assert new["device"]["step_rounds"] == run["rounds"]
    assert run["replaced"] == {"step": 2} and run["rounds"] == 3 and "--rounds 3" in run["command"]
    assert run["round_spread"]["median"] >= 1.0


def test_remeasure_steps_needs_two_rounds_and_writes_nothing_otherwise(tmp_path, capsys):
    src, out = tmp_path / "p.json", tmp_path / "q.json"
    profile.save(_cpu_profile(), src)
    with pytest.raises(SystemExit) as exc:
        _script("remeasure_steps").main([str(src), "--out", str(out), "--rounds", "1"])
    assert exc.value.code == 2 and not out.exists()
    assert "--rounds: expected 2 or more (the median of rounds), got 1; pass --rounds 5" in capsys.readouterr().err


def test_remeasure_steps_refuses_a_profile_of_a_gpu_this_machine_lacks(tmp_path, capsys):
    from dataclasses import replace

    p = tmp_path / "h.json"
    base = _cpu_profile()
    profile.save(replace(base, device={**base.device, "type": "cuda", "name": "NVIDIA H200"}), p)
    if torch.cuda.is_available():
        pytest.skip("a GPU is here; the refusal is for machines without the profile's GPU")
    assert _script("remeasure_steps").main([str(p), "--out", str(tmp_path / "o.json")]) == 2
    assert "measured on NVIDIA H200; run this on a GPU of that model" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_the_summary_pools_device_bound_and_host_paced_cases(tmp_path, capsys):
    rep = tmp_path / "advisor-single-gpu-r1-repredict_cpu_x.txt"
    rep.write_text(
        "| case | params | seq x mb | ac | loss | step measured | predicted | error |\n"
        "| gpt-350m | 0.35 B | 1024 x 16 | none | upcast | 100.0 ms | 102.0 ms | +2.0% | 1 / 1 GiB |\n"
        "| gpt-1.3b | 1.32 B | 4096 x 1 | op | upcast | 100.0 ms | 90.0 ms | -10.0% | 1 / 1 GiB |\n"
        "| gpt-650m-mb8 | 0.64 B | 1024 x 8 | full | upcast | 100.0 ms | 96.0 ms | -4.0% | 1 / 1 GiB |\n"
        "| llama-160m | 0.16 B | 1024 x 16 | none | upcast | 1,000.0 ms | 960.0 ms | -4.0% | 1 / 1 GiB |\n")
    assert _script("advisor_repredict_summary").main(["--label", "t", str(rep)]) == 0
    out = capsys.readouterr().out
    assert "| r1-repredict | gpt-1.3b | op | -10.0% |" in out
    assert "- device-bound: 2 cases, median |error| 3.0%, worst 4.0%" in out
    assert "- host-paced (op, gpt-650m-mb8): 2 cases, median |error| 7.0%, worst 10.0%" in out
    assert "- all: 4 cases, median |error| 4.0%, worst 10.0%, within 10%: 4/4" in out
