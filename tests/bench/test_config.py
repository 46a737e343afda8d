"""gpucomm.bench.config: dtype names, machine defaults and the checks a BenchConfig makes on construction."""

import math
import pickle

import pytest
import torch

from gpucomm.bench import config as bench_config
from gpucomm.bench.config import DTYPES, BenchConfig, defaults_for, parse_dtype
from gpucomm.collectives import CollectiveName, ReduceOp


def cfg(**changes) -> BenchConfig:
    base = dict(ops=(CollectiveName("all_reduce"),), backends=("gpucomm.comm",), sizes=(8, 64),
                dtypes=(torch.float32, torch.bfloat16), reduce_ops=(ReduceOp.SUM,), iters=3, warmup=1,
                check=1, device_type="cpu", devices=(torch.device("cpu"), torch.device("cpu")))
    return BenchConfig(**{**base, **changes})


@pytest.mark.parametrize("name, dtype", [
    ("float32", torch.float32), ("fp16", torch.float16), (" BF16 ", torch.bfloat16), ("double", torch.float64),
    ("int", torch.int32), ("long", torch.int64), ("half", torch.float16),
])
def test_parse_dtype_accepts_names_and_aliases(name, dtype):
    assert parse_dtype(name) is dtype


def test_parse_dtype_lists_the_choices_on_an_unknown_name():
    with pytest.raises(ValueError) as info:
        parse_dtype("complex64")
    assert str(info.value) == ("--dtype: unknown dtype 'complex64'; expected one of "
                               "float32, float16, bfloat16, float64, int32, int64 (or 'all')")
    assert all(isinstance(getattr(torch, d), torch.dtype) for d in DTYPES)


def test_cpu_defaults_are_the_small_sweep(monkeypatch):
    monkeypatch.setattr(bench_config.os, "cpu_count", lambda: 2)
    d = defaults_for("cpu")
    assert (d.minbytes, d.maxbytes, d.stepfactor, d.iters, d.warmup, d.nproc) == (8, 4 << 20, 8, 20, 3, 2)
    monkeypatch.setattr(bench_config.os, "cpu_count", lambda: 64)
    assert defaults_for("cpu").nproc == 4  # capped at 4
    monkeypatch.setattr(bench_config.os, "cpu_count", lambda: None)
    assert defaults_for("cpu").nproc == 2


def test_cuda_defaults_sweep_to_256_mib_with_one_process_per_gpu(monkeypatch):
    import gpucomm.devices

    monkeypatch.setattr(gpucomm.devices, "cuda_device_count", lambda: 8)
    d = defaults_for("cuda")
    assert (d.minbytes, d.maxbytes, d.stepfactor, d.iters, d.warmup, d.nproc) == (8, 256 << 20, 4, 20, 5, 8)
    monkeypatch.setattr(gpucomm.devices, "cuda_device_count", lambda: 0)
    assert defaults_for("cuda").nproc == 1


@pytest.mark.parametrize("changes, message", [
    ({"iters": 0}, "--iters: expected at least 1 timed iteration, but got 0"),
    ({"warmup": -1}, "--warmup-iters: expected a non-negative count, but got -1"),
    ({"check": -2}, "--check: expected a non-negative count (0 turns checking off), but got -2"),
    ({"nproc": 0}, "--nproc: expected at least 1 process, but got 0"),
    ({"timeout": 0.0}, "--timeout: expected a finite number of seconds > 0, such as 600, but got 0.0"),
    ({"timeout": math.inf}, "--timeout: expected a finite number of seconds > 0, such as 600, but got inf"),
    ({"timeout": True}, "--timeout: expected a finite number of seconds > 0, such as 600, but got True"),
    ({"min_busbw": -1.0}, "--min-busbw: expected a non-negative GB/s figure, but got -1.0"),
    ({"min_busbw": math.nan}, "--min-busbw: expected a non-negative GB/s figure, but got nan"),
    ({"root": -1}, "--root: expected a non-negative participant index, but got -1"),
    ({"cuda_graph": True}, "--cuda-graph: CUDA graphs need CUDA devices, but this run is on CPU; drop the flag"),
])
def test_bad_settings_are_refused_with_the_flag_named(changes, message):
    with pytest.raises(ValueError) as info:
        cfg(**changes)
    assert str(info.value) == message


def test_timing_mode_follows_device_type_and_graph_flag():
    assert cfg().timing == "perf-counter"
    assert cfg(device_type="cuda").timing == "cuda-events"
    assert cfg(device_type="cuda", cuda_graph=True).timing == "cuda-graph"


def test_params_are_json_ready_and_carry_extra():
    p = cfg(extra={"note": "x"}, min_busbw=1.5).params()
    assert p["ops"] == ["all_reduce"] and p["dtypes"] == ["float32", "bfloat16"]
    assert p["reduce_ops"] == ["sum"] and p["devices"] == ["cpu", "cpu"] and p["sizes"] == [8, 64]
    assert p["timing"] == "perf-counter" and p["min_busbw"] == 1.5 and p["note"] == "x"
    assert (p["iters"], p["warmup"], p["check"], p["nproc"], p["root"]) == (3, 1, 1, 1, 0)


def test_replace_checks_again_and_configs_survive_pickling():
    c = cfg()
    assert c.replace(iters=7).iters == 7 and c.iters == 3
    with pytest.raises(ValueError, match="--iters"):
        c.replace(iters=0)
    assert pickle.loads(pickle.dumps(c)) == c
