"""The hardware table: sourced numbers; unknown names give None and a warning."""

from __future__ import annotations

import dataclasses

import pytest

from gpucomm.advisor import hardware


def test_every_profile_cites_a_source_for_every_number():
    for p in hardware.PROFILES.values():
        for key in ("peak_tflops", "memory_bytes", "memory_bw_gbps", "intra", "inter"):
            assert p.sources.get(key), (p.name, key)
        assert p.intra.source and p.inter.source


def test_unknown_hardware_is_none_with_a_warning():
    with pytest.warns(UserWarning, match="known profiles"):
        assert hardware.get("tpu-v9") is None


def test_cpu_gloo_exists_only_via_calibration():
    with pytest.warns(UserWarning, match="--calibrate"):
        assert hardware.get("cpu-gloo") is None


def test_h200_numbers_are_the_reference_figures():
    p = hardware.get("h200-nvswitch")
    # capacity is what the driver reports usable on our H200 (the train run's env block), not the datasheet's 141 GB
    assert p.memory_bytes == 150_109_880_320 and p.memory_bw_gbps == 4800
    assert p.intra.bandwidth_gbps == 365.0 and p.inter.bandwidth_gbps == 8 * 48.0
    assert p.peak_flops("bf16") == p.peak_flops("fp16") == 989.4e12
    assert p.peak_flops("int4") is None


def test_with_network_swaps_only_the_network():
    p = hardware.get("h100-nvswitch")
    q = hardware.with_network(p, hardware.NETWORKS["roce-400x4"])
    assert q.inter.bandwidth_gbps == 4 * 39.0 and q.intra == p.intra
    assert dataclasses.replace(q, name=p.name, inter=p.inter, sources=p.sources) == p
    with pytest.warns(UserWarning):
        assert hardware.get_network("myrinet") is None


def test_h200_capacity_matches_the_committed_env_block():
    import json
    from pathlib import Path

    path = Path(__file__).parents[2] / "benchmarks/results/train-gpt124m_h200x1_2026-12-02/records.jsonl"
    env = json.loads(path.read_text().splitlines()[0])
    totals = [d.get("total_memory_bytes") for d in env["devices"]]
    assert hardware.get("h200-nvswitch").memory_bytes in totals


def test_every_profile_lists_its_sources():
    text = "\n".join(hardware.describe())
    for name, p in hardware.PROFILES.items():
        assert name in text
        for key in ("peak_tflops", "memory_bytes", "memory_bw_gbps", "intra", "gemm_efficiency"):
            assert p.sources[key]
    for name in hardware.NETWORKS:
        assert name in text


def test_issue_profiles_exist():
    for name in ("a100-nvlink3", "a100-40gb-nvlink3", "h100-nvswitch", "h200-nvswitch", "v100-nvlink2",
                 "pcie-gen4", "pcie-gen5"):
        assert hardware.get(name) is not None
    assert hardware.get("a100-40gb-nvlink3").memory_bytes < hardware.get("a100-nvlink3").memory_bytes


def test_published_run_profiles_carry_the_sources_figures():
    # torchtitan's H100s (docs/performance.md): 96 GB HBM2e at 2.4 TB/s; the 80 GB SXM part: 3.35 TB/s
    tt = hardware.get("h100-96gb-nvswitch")
    assert tt.memory_bw_gbps == 2400 and tt.memory_bytes > hardware.get("h100-nvswitch").memory_bytes
    # Megatron-LM 2019's DGX-2H: 16 GPUs per server, 39 TFLOP/s = 30% of peak -> 130, 100 GB/s per server
    dgx2h = hardware.get("v100-dgx2h")
    assert dgx2h.max_gpus_per_node == 16 and dgx2h.peak_flops("fp16") == 130e12
    assert dgx2h.inter.bandwidth_gbps == 8 * 12.0 and dgx2h.peak_flops("bf16") is None
