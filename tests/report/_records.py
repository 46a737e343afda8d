"""Synthetic records for the report tests, built with the record dataclasses (never hand-written JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpucomm.records import AdviceRecord, BenchRecord, EnvRecord, RecordWriter, ScaleRecord, TrainRecord

GiB = 1 << 30
MALICIOUS = "<script>alert(1)</script>"


def env(hostname: str = "hostA", device: str | None = "NVIDIA H200", torch: str = "2.11.0+cu130",
        created: str = "2026-12-02T10:00:00+00:00", device_type: str = "cuda",
        command: list[str] | None = None, **extra: Any) -> EnvRecord:
    devices = [] if device is None else [{"index": i, "name": device, "total_memory_bytes": 141 * GiB,
                                          "capability": "9.0"} for i in range(2)]
    return EnvRecord(created=created, command=command or ["gpucomm", "bench", "--ops", "all_reduce"],
                     versions={"gpucomm": "0.1.0", "torch": torch, "cuda": "13.0", "nccl": "2.28.9",
                               "python": "3.12.3"},
                     host={"hostname": hostname, "platform": "Linux", "cpu_count": 16},
                     devices=devices, device_type=device_type,
                     env_vars={"NCCL_NVLS_ENABLE": "0", "CUDA_VISIBLE_DEVICES": "0,1"}, extra=dict(extra))


def bench(op: str = "all_reduce", backend: str = "gpucomm.comm", size: int = 1 << 20, n: int = 2,
          placement: str = "out-of-place", time_us: float = 10.0, wrong: int = 0,
          speedup: float | None = None, baseline: str | None = None, dtype: str = "float32",
          device_type: str = "cuda") -> BenchRecord:
    algbw = size / (time_us * 1e-6) / 1e9
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    return BenchRecord(op=op, backend=backend, size=size, count=size // 4, dtype=dtype, n=n, world_size=1,
                       placement=placement, device_type=device_type, timing="cuda-events",
                       time_us_median=time_us, time_us_p99=time_us * 1.5, algbw_gbps=algbw,
                       busbw_gbps=algbw * factor, wrong=wrong, iters=20, warmup=5,
                       reduce_op="sum" if op in ("all_reduce", "reduce", "reduce_scatter") else None,
                       baseline=baseline, speedup=speedup)


def bench_sweep(device_type: str = "cuda") -> list[BenchRecord]:
    """all_reduce and all_gather, two backends, both placements, 4 sizes; gpucomm 1.25x faster."""
    rows = []
    for op in ("all_reduce", "all_gather"):
        for placement in ("out-of-place", "in-place"):
            for k in (10, 16, 20, 26):
                size = 1 << k
                base_t = 5.0 + size / 100e3
                rows.append(bench(op, "torch.cuda.comm", size, placement=placement, time_us=base_t,
                                  device_type=device_type))
                rows.append(bench(op, "gpucomm.comm", size, placement=placement, time_us=base_t / 1.25,
                                  speedup=1.25, baseline="torch.cuda.comm", device_type=device_type))
    return rows


def train(strategy: str, n: int, sps: float, equal: bool | None = True, status: str = "ok",
          eff: float | None = None, note: str = "") -> TrainRecord:
    ok = status == "ok"
    return TrainRecord(strategy=strategy, model="gpt-tiny", n_devices=n, world_size=1, device_type="cuda",
                       precision="fp32", global_batch=32, seq_len=128, steps=20, warmup_steps=5,
                       status=status, params=1_000_000, samples_per_s=sps if ok else None,
                       tokens_per_s=sps * 128 if ok else None, step_ms_median=32000 / sps if ok else None,
                       step_ms_p90=33000 / sps if ok else None, comm_ms_median=1.5 if ok and n > 1 else None,
                       peak_mem_bytes=[3 * GiB] * n if ok else [], scaling_efficiency=eff,
                       equal_to_single=equal if ok and strategy != "single" else None,
                       max_loss_rel_diff=1e-7 if equal is not None else None, tolerance=1e-5, note=note)


def train_rows() -> list[TrainRecord]:
    return [train("single", 1, 100.0, eff=1.0),
            train("dp", 2, 150.0, eff=0.75), train("replicated", 2, 190.0, eff=0.95),
            train("ddp", 2, 185.0, eff=0.925, equal=False),
            train("dp", 4, 0.0, status="not-applicable", note="dp needs CUDA")]


def advice(strategy: str, rank: int | None, fits: bool = True, sps: float = 1000.0) -> AdviceRecord:
    return AdviceRecord(strategy=strategy, hardware="h200-nvswitch", nodes=1, gpus_per_node=8, model="gpt2",
                        params=124_000_000, global_batch=64, seq_len=1024, step_time_s=64 / sps,
                        samples_per_s=sps, scaling_efficiency=0.9, memory_per_gpu_bytes=(20 if fits else 200) * GiB,
                        memory_capacity_bytes=141 * GiB, fits=fits, comm_share=0.12, rank=rank,
                        reason=f"{strategy}: reason text", tokens_per_s=sps * 1024)


def advice_rows() -> list[AdviceRecord]:
    return [advice("zero3", None, fits=False), advice("ddp", 2, sps=900.0), advice("zero1", 1, sps=950.0)]


def scale_rows() -> list[ScaleRecord]:
    return [ScaleRecord(strategy=s, hardware="h200-nvswitch", gpus=g, nodes=max(1, g // 8),
                        samples_per_s=100.0 * g * eff ** (g.bit_length() - 1), scaling_efficiency=eff ** (g.bit_length() - 1),
                        step_time_s=0.5, fits=True)
            for s, eff in (("ddp", 0.97), ("zero3", 0.9)) for g in (1, 2, 4, 8, 16, 32)]


def write(directory: Path, env_record: EnvRecord, rows: list) -> Path:
    with RecordWriter(directory, env_record) as w:
        for row in rows:
            w.write(row)
    return directory
