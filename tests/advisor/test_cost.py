"""Every formula in gpucomm.advisor.cost against hand-worked values."""

from __future__ import annotations

import pytest

from gpucomm.advisor import cost

MiB = 2**20


def test_ring_all_reduce_hand_worked():
    # 1 GB over 8 ranks at 100 GB/s, 1 us a step: 2*7/8 * 10 ms + 14 us.
    assert cost.ring_all_reduce_s(1e9, 8, 100e9, 1e-6) == pytest.approx(0.017514, rel=1e-9)


def test_ring_all_reduce_one_participant_is_free():
    assert cost.ring_all_reduce_s(1e9, 1, 100e9, 1e-6) == 0.0


def test_all_gather_and_reduce_scatter_cost_half_an_all_reduce_bandwidth():
    assert cost.ring_all_gather_s(1e9, 8, 100e9, 1e-6) == pytest.approx(0.008757, rel=1e-9)
    assert cost.ring_reduce_scatter_s(1e9, 8, 100e9, 1e-6) == pytest.approx(0.008757, rel=1e-9)


def test_broadcast_pipelined_chain():
    assert cost.ring_broadcast_s(1e9, 8, 100e9, 1e-6) == pytest.approx(0.010007, rel=1e-9)
    assert cost.ring_broadcast_s(1e9, 1, 100e9, 1e-6) == 0.0


def test_tree_latency_is_logarithmic():
    # 16 ranks: 2*15/16 * 10 ms + 2*4 us.
    assert cost.tree_all_reduce_s(1e9, 16, 100e9, 1e-6) == pytest.approx(0.018758, rel=1e-9)


def test_bad_participant_count():
    with pytest.raises(ValueError, match="n: expected"):
        cost.ring_all_reduce_s(1.0, 0, 1.0, 0.0)


def test_hierarchical_single_machine_is_the_ring():
    assert cost.hierarchical_s("all_reduce", 1e9, 8, 1, (100e9, 1e-6), None) == pytest.approx(0.017514)


def test_hierarchical_two_machines_hand_worked():
    # intra 2*7/8*1e9/365e9 = 4.794521 ms; inter 2*1/2*1e9/384e9 = 2.604167 ms;
    # latency 14*1 us + min(2, 2*1)*14 us = 42 us.  Pipelined takes the slower tier, else the sum.
    intra, inter = (365e9, 1e-6), (384e9, 14e-6)
    assert cost.hierarchical_s("all_reduce", 1e9, 8, 2, intra, inter) == pytest.approx(4.836521e-3, rel=1e-6)
    assert cost.hierarchical_s("all_reduce", 1e9, 8, 2, intra, inter, pipelined=False) == \
        pytest.approx(7.440688e-3, rel=1e-6)


def test_hierarchical_all_reduce_busbw_matches_published_multinode_figures():
    # 2 and 4 HGX H100 nodes with 8x400G: 365-470 GB/s busbw measured (collective-bench.md §3).
    from gpucomm.advisor.hardware import PROFILES

    p = PROFILES["h100-nvswitch"]
    intra = (p.intra.bandwidth_gbps * 1e9, p.intra.alpha_us * 1e-6)
    inter = (p.inter.bandwidth_gbps * 1e9, p.inter.alpha_us * 1e-6)
    for m in (2, 4):
        n = 8 * m
        t = cost.hierarchical_s("all_reduce", 8 * 2**30, 8, m, intra, inter)
        busbw = 8 * 2**30 / t * 2 * (n - 1) / n / 1e9
        assert 365 * 0.9 <= busbw <= 470, (m, busbw)


def test_hierarchical_rejects_rooted_ops_across_machines_and_unknown_ops():
    with pytest.raises(ValueError, match="one machine"):
        cost.hierarchical_s("broadcast", 1.0, 8, 2, (1.0, 0.0), (1.0, 0.0))
    with pytest.raises(ValueError, match="op: expected"):
        cost.hierarchical_s("all_to_all", 1.0, 8, 1, (1.0, 0.0), None)
    with pytest.raises(ValueError, match="--network"):
        cost.hierarchical_s("all_reduce", 1.0, 8, 2, (1.0, 0.0), None)


def test_bucket_sizes_small_first_then_cap():
    assert cost.bucket_sizes(60 * MiB) == [1 * MiB, 25 * MiB, 25 * MiB, 9 * MiB]
    assert cost.bucket_sizes(512) == [512]
    assert cost.bucket_sizes(0) == []


def test_overlap_last_bucket_is_exposed():
    # Two equal chunks over a 2 s window, 1 s each: the second is ready at 2 s and ends at 3 s.
    assert cost.overlapped_exposed_s([1, 1], [1.0, 1.0], 2.0) == pytest.approx(1.0)
    # Fast communication: only the last chunk's time shows.
    assert cost.overlapped_exposed_s([1, 1, 1], [0.01, 0.01, 0.01], 3.0) == pytest.approx(0.01)
    # A stream that cannot keep up: 3 x 2 s of communication after a 3 s window that starts them at 1, 2, 3.
    assert cost.overlapped_exposed_s([1, 1, 1], [2.0, 2.0, 2.0], 3.0) == pytest.approx(4.0)
