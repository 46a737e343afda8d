"""``dp``: not applicable on CPU (never emulated); on CUDA its DataParallel phases report host time."""

from gpucomm.testing.markers import requires_gpus
from gpucomm.train.config import TrainConfig
from gpucomm.train.loop import run_strategy
from gpucomm.train.models import load_workload
from gpucomm.train.strategies.dp import DataParallelStrategy


def test_not_applicable_on_cpu_with_the_reason():
    cfg = TrainConfig(model="mlp", steps=2, warmup_steps=1, global_batch=4, devices=["cpu", "cpu"])
    reason = DataParallelStrategy.not_applicable(cfg)
    assert reason is not None and "CUDA" in reason and "not emulated" in reason
    assert DataParallelStrategy.world_size(cfg) == 1 and not DataParallelStrategy.needs_process_group(cfg)


@requires_gpus(1)
def test_phases_of_dataparallel_are_timed_on_a_repeated_gpu():
    cfg = TrainConfig(model="mlp", steps=4, warmup_steps=2, global_batch=8, devices=["cuda:0", "cuda:0"])
    run = run_strategy(DataParallelStrategy(cfg, cfg.devices), load_workload("mlp"), cfg)
    phases = set().union(*run.host_phases_ms)
    assert {"scatter", "replicate", "parallel_apply", "gather", "backward", "optimizer"} <= phases
    assert run.devices_driven == 2 and run.gpu_ms and run.host_source.startswith("warmup")
