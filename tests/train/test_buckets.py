import pytest
import torch

from gpucomm.train._buckets import MiB, plan_buckets


def _params(*numels, dtype=torch.float32):
    return [torch.empty(n, dtype=dtype) for n in numels]


def test_reverse_order_each_index_once():
    params = _params(*([1000] * 10))
    buckets = plan_buckets(params, cap_bytes=8000, first_cap_bytes=4000)
    flat = [i for b in buckets for i in b]
    assert flat == list(range(9, -1, -1))


def test_first_bucket_small_then_cap():
    params = _params(*([256 * 1024] * 12))  # 1 MiB each in fp32
    buckets = plan_buckets(params, cap_bytes=4 * MiB, first_cap_bytes=1 * MiB)
    assert [len(b) for b in buckets] == [1, 4, 4, 3]
    assert buckets[0] == [11]


def test_large_parameter_alone_and_dtype_split():
    params = _params(10, 10) + _params(10_000_000) + _params(10, dtype=torch.bfloat16)
    buckets = plan_buckets(params, cap_bytes=MiB, first_cap_bytes=MiB)
    assert buckets[0] == [3]          # bf16 parameter: its own bucket (dtype change closes it)
    assert buckets[1] == [2]          # 40 MB parameter exceeds the cap alone
    assert buckets[2] == [1, 0]


def test_gpt_like_default_caps():
    params = _params(*([2_359_296, 768] * 12))  # 12 blocks of a 768x3072 weight and a bias
    buckets = plan_buckets(params, cap_bytes=25 * MiB, first_cap_bytes=MiB)
    assert len(buckets[0]) == 2  # bias + first big weight reach 1 MiB at once
    for b in buckets[1:-1]:
        assert sum(params[i].numel() * 4 for i in b) >= 25 * MiB


@pytest.mark.parametrize("caps", [(0, 1), (1, 0), (-5, 10)])
def test_bad_caps(caps):
    with pytest.raises(ValueError, match="bucket caps"):
        plan_buckets(_params(4), *caps)
