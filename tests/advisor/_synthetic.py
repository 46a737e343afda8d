"""Synthetic bench and train records for advisor tests (known alpha, beta and step times)."""

from __future__ import annotations

import random

from gpucomm.records import BenchRecord, EnvRecord, ResultSet, TrainRecord


def bench(op: str, n: int, alpha_us: float, gbps: float, sizes, noise: float = 0.0, seed: int = 0,
          backend: str = "torch.distributed", world_size: int | None = None) -> list[BenchRecord]:
    rng = random.Random(seed)
    out = []
    for s in sizes:
        t = (alpha_us + s / (gbps * 1e3)) * (1 + rng.uniform(-noise, noise))
        out.append(BenchRecord(op=op, backend=backend, size=s, count=s // 4, dtype="float32", n=n,
                               world_size=n if world_size is None else world_size, placement="out-of-place",
                               device_type="cpu", timing="perf-counter", time_us_median=t, time_us_p99=t,
                               algbw_gbps=s / t / 1e3, busbw_gbps=s / t / 1e3, wrong=0, iters=10, warmup=2))
    return out


def train(strategy: str, model: str, n: int, step_ms: float, global_batch: int, params: int,
          seq_len: int | None = None) -> TrainRecord:
    return TrainRecord(strategy=strategy, model=model, n_devices=n, world_size=n if strategy == "ddp" else 1,
                       device_type="cpu", precision="fp32", global_batch=global_batch, seq_len=seq_len, steps=10,
                       warmup_steps=2, params=params, step_ms_median=step_ms)


def env() -> EnvRecord:
    return EnvRecord(created="2026-12-02T00:00:00+00:00", command=["test"], versions={}, host={}, devices=[],
                     device_type="cpu", env_vars={})


def results(bench_rows=(), train_rows=()) -> ResultSet:
    rs = ResultSet()
    rs.env.append(env())
    rs.bench.extend(bench_rows)
    rs.train.extend(train_rows)
    return rs


SIZES = [2**k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB
