"""Predictions and ranking, and the sanity the field knows, asserted from the model."""

from __future__ import annotations

import dataclasses

import pytest

from gpucomm.advisor import hardware, plan
from gpucomm.advisor.workload import make_workload

H200 = hardware.PROFILES["h200-nvswitch"]
H100 = hardware.PROFILES["h100-nvswitch"]
SHARDED = {"zero1", "zero2", "zero3", "fsdp"}


def _by(preds):
    return {p.strategy: p for p in preds}


def test_ddp_beats_dataparallel_on_one_multi_gpu_machine():
    for prof in (H200, hardware.PROFILES["pcie-gen4"]):
        preds = _by(plan.advise(prof, make_workload("gpt-124m", global_batch=256), gpus_per_node=8))
        assert preds["ddp"].step_time_s < preds["dp"].step_time_s
        assert preds["ddp"].rank < preds["dp"].rank
        # Even without DataParallel's per-device Python cost, its serial broadcast + reduce is exposed.
        assert preds["dp"].exposed_comm_s > preds["ddp"].exposed_comm_s


def test_dataparallel_gap_grows_with_gpu_count():
    wl = make_workload("gpt-124m", global_batch=256)
    ratio = [plan.predict("dp", H200, wl, gpus_per_node=g).step_time_s
             / plan.predict("ddp", H200, wl, gpus_per_node=g).step_time_s for g in (2, 8)]
    assert ratio[1] > ratio[0]


def test_sharding_is_chosen_only_when_the_replicated_state_does_not_fit():
    small = plan.advise(H200, make_workload("gpt-124m", global_batch=256), gpus_per_node=8)
    assert small[0].strategy not in SHARDED
    assert all(p.fits for p in small if p.strategy in ("ddp", "replicated"))
    big = _by(plan.advise(H100, make_workload(None, params=7_000_000_000, global_batch=64, seq_len=1),
                          gpus_per_node=8))
    assert not big["ddp"].fits and big["ddp"].rank is None and "does not fit" in big["ddp"].reason
    best = min((p for p in big.values() if p.rank), key=lambda p: p.rank)
    assert best.strategy in SHARDED and best.fits


def _first_fitting_gpus(params, strategy):
    wl = make_workload(None, params=params, global_batch=4096, seq_len=1)
    for gpus in (1, 2, 4, 8, 16, 32, 64):
        if plan.predict(strategy, H100, wl, gpus_per_node=min(gpus, 8), nodes=max(1, gpus // 8)).fits:
            return gpus
    return 10**9


def test_a_larger_model_shifts_the_crossover_to_more_gpus():
    # The GPU count at which ZeRO-2 (2 Psi + 14 Psi / N) first fits in 80 GB moves up with the model.
    crossover = [_first_fitting_gpus(p, "zero2") for p in (3e9, 12e9, 25e9)]
    assert crossover == sorted(crossover) and len(set(crossover)) == 3
    # And DDP, which shards nothing, stops fitting at a model size no GPU count fixes.
    assert _first_fitting_gpus(3e9, "ddp") == 1 and _first_fitting_gpus(12e9, "ddp") == 10**9


def test_multi_node_hurts_efficiency():
    wl1 = make_workload("gpt-350m", global_batch=64)
    wl4 = make_workload("gpt-350m", global_batch=256)  # same 8 samples per GPU
    one = plan.predict("ddp", H200, wl1, gpus_per_node=8, nodes=1)
    four = plan.predict("ddp", H200, wl4, gpus_per_node=8, nodes=4)
    assert four.scaling_efficiency < one.scaling_efficiency
    assert four.comm_s > one.comm_s


def test_slower_network_hurts_more():
    wl = make_workload("gpt-350m", global_batch=256)
    ib = plan.predict("zero3", H200, wl, gpus_per_node=8, nodes=4)
    roce = plan.predict("zero3", hardware.with_network(H200, hardware.NETWORKS["roce-400x4"]), wl,
                        gpus_per_node=8, nodes=4)
    assert roce.comm_s > ib.comm_s


def test_single_process_strategies_do_not_span_machines():
    preds = _by(plan.advise(H200, make_workload("gpt-124m", global_batch=256), gpus_per_node=8, nodes=2))
    for s in ("dp", "replicated"):
        assert not preds[s].applicable and preds[s].rank is None and "machines" in preds[s].reason


def test_zero3_moves_half_again_as_much_as_ddp():
    wl = make_workload(None, params=1_000_000_000, global_batch=64, seq_len=1)
    no_latency = dataclasses.replace(H200, intra=dataclasses.replace(H200.intra, alpha_us=0.0))
    ddp = plan.predict("ddp", no_latency, wl, gpus_per_node=8)
    z3 = plan.predict("zero3", no_latency, wl, gpus_per_node=8)
    # ddp 2(n-1)/n * 2 Psi bytes, zero3 3 * (n-1)/n * 2 Psi: 1.5x.
    assert z3.comm_s / ddp.comm_s == pytest.approx(1.5, rel=1e-9)
    # With latency, DDP's ~80 buckets pay 14 ring steps each; one fused zero3 unit pays few.
    assert plan.predict("zero3", H200, wl, gpus_per_node=8).comm_s > plan.predict("ddp", H200, wl, gpus_per_node=8).comm_s


def test_memory_per_strategy_orders_as_zero_says():
    wl = make_workload("gpt-350m", global_batch=64)
    mem = {s: plan.predict(s, H200, wl, gpus_per_node=8).memory_parts["model_state"] for s in plan.STRATEGIES}
    assert mem["ddp"] == 16 * wl.params
    assert mem["ddp"] > mem["zero1"] > mem["zero2"] > mem["fsdp"]


def test_ranking_reasons_and_order():
    preds = plan.advise(H200, make_workload("gpt-124m", global_batch=256), gpus_per_node=8)
    assert [p.rank for p in preds if p.rank] == list(range(1, 1 + sum(1 for p in preds if p.rank)))
    assert all(p.reason for p in preds)
    dp = _by(preds)["dp"]
    assert "slower than" in dp.reason


def test_scale_covers_powers_of_two_and_per_gpu_batch():
    preds = plan.scale(H200, make_workload("gpt-124m", global_batch=256), per_gpu_batch=32, max_gpus=64,
                       strategies=("ddp",))
    assert [p.gpus for p in preds] == [1, 2, 4, 8, 16, 32, 64]
    assert preds[-1].nodes == 8
    # One GPU: no communication, only DDP's own hook overhead (measured on one GPU by PyTorch).
    one = preds[0]
    assert one.exposed_comm_s == 0 and one.overhead_s == pytest.approx(plan.DDP_OVERHEAD_FRAC * one.compute_s)
    assert one.scaling_efficiency == pytest.approx((one.compute_s + one.optimizer_s) / one.step_time_s)
    assert 1 / (1 + plan.DDP_OVERHEAD_FRAC) < one.scaling_efficiency < 1
    assert preds[-1].scaling_efficiency < preds[3].scaling_efficiency


def test_uncalibrated_cpu_link_is_an_error_not_a_number():
    from gpucomm.advisor.calibrate import _base_profile
    from gpucomm.records import ResultSet

    prof = _base_profile(ResultSet(), None)
    with pytest.raises(plan.PredictionError):
        plan.predict("ddp", prof, make_workload("mlp"), gpus_per_node=2)


def test_unknown_strategy():
    with pytest.raises(ValueError, match="strategy"):
        plan.predict("horovod", H200, make_workload("mlp"), gpus_per_node=2)


def test_sharded_strategies_inherit_ddps_calibrated_overheads():
    wl = make_workload("gpt-124m", global_batch=64)
    calibrated = dataclasses.replace(H200, calibration={"per_device_s": {"ddp": 0.001}, "slowdown": {"ddp": 0.5}})
    base = plan.predict("zero1", H200, wl, gpus_per_node=8)
    z1 = plan.predict("zero1", calibrated, wl, gpus_per_node=8)
    assert z1.overhead_s - base.overhead_s == pytest.approx(8 * 0.001 + 0.5 * z1.compute_s)
    assert any("taken from ddp" in a for a in z1.assumptions)
    # One-process strategies keep their own (here: assumed) costs.
    assert plan.predict("dp", calibrated, wl, gpus_per_node=8).overhead_s == \
        plan.predict("dp", H200, wl, gpus_per_node=8).overhead_s


@pytest.mark.parametrize("omp, factor", [("1", 1.0), ("2", 2.0)])
def test_cpu_devices_share_cores_alike_for_processes_and_threads(omp, factor):
    """2 cores, one single row of 10 ms at B=32: at 2 devices each does B=16 (5 ms) x max(1, 2 t / 2)."""
    from gpucomm.advisor import calibrate

    from ._synthetic import SIZES, bench, results, train

    rs = results(bench("all_reduce", 2, 40.0, 2.0, SIZES), [train("single", "mlp", 1, 10.0, 32, 267280)])
    rs.env[0] = dataclasses.replace(rs.env[0], host={"cpu_count": 2}, env_vars={"OMP_NUM_THREADS": omp})
    prof = calibrate.calibrate(rs)
    wl = make_workload("mlp", dtype="fp32", global_batch=32)
    for strategy in ("ddp", "replicated"):  # ATen ops release the GIL: threads run on both cores too
        pred = plan.predict(strategy, prof, wl, gpus_per_node=2, per_device_s=0.0, slowdown=0.0)
        assert pred.compute_s == pytest.approx(0.005 * factor)


# ------------------------------------------------ DataParallel from its mechanics; measured host cost
def test_dataparallel_gathers_the_logits_and_scatters_their_gradient():
    from gpucomm.advisor import hardware
    from gpucomm.advisor.plan import collective_s, dp_output_bytes, predict
    from gpucomm.advisor.workload import make_workload

    prof = hardware.get("h200-nvswitch")
    wl = make_workload("gpt-124m", dtype="bf16", global_batch=64)
    assert dp_output_bytes(wl) == 64 * 1024 * 50304 * 2
    p = predict("dp", prof, wl, gpus_per_node=8)
    gather = collective_s(prof, "gather", dp_output_bytes(wl), 8, 1, "local")
    scatter = collective_s(prof, "scatter", dp_output_bytes(wl), 8, 1, "local")
    assert p.comm_s >= gather + scatter > 0
    assert p.memory_parts["gathered_outputs"] == 2 * dp_output_bytes(wl)
    ddp = predict("ddp", prof, wl, gpus_per_node=8)
    assert p.step_time_s > ddp.step_time_s


def test_host_cost_comes_from_train_records_when_they_have_it():
    import dataclasses

    from gpucomm.advisor import calibrate, hardware
    from gpucomm.advisor.plan import predict
    from gpucomm.advisor.workload import make_workload

    from ._synthetic import results, train

    rows = [dataclasses.replace(train("dp", "gpt-124m", n, 100.0 + 5 * n, 64, 124_475_904, 1024),
                                device_type="cuda", precision="bf16", host_ms_per_device=h)
            for n, h in ((2, 3.0), (4, 3.4), (8, 3.2))]
    rows.append(dataclasses.replace(train("single", "gpt-124m", 1, 90.0, 64, 124_475_904, 1024),
                                    device_type="cuda", precision="bf16"))
    prof = calibrate.calibrate(results(train_rows=rows), "h200-nvswitch")
    assert prof.calibration["host_per_device"]["dp"] == {"s": 3.2e-3, "rows": 3}
    p = predict("dp", prof, make_workload("gpt-124m", global_batch=64), gpus_per_node=8)
    assert any("measured" in a and "3.20 ms" in a for a in p.assumptions)
    q = predict("dp", hardware.get("h200-nvswitch"), make_workload("gpt-124m", global_batch=64), gpus_per_node=8)
    assert any("ASSUMED" in a for a in q.assumptions)
