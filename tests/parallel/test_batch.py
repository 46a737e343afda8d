"""gpucomm.parallel.batch: the split rule (tensor_split sizes, in order), structures, and its refusals."""

from collections import namedtuple

import pytest
import torch

from gpucomm.parallel.batch import BatchError, shard_sizes, split, split_call, split_like, to_device

Pair = namedtuple("Pair", "x z")


def test_sizes_are_tensor_splits():
    for b in range(3, 12):
        assert shard_sizes(b, 3) == [len(t) for t in torch.tensor_split(torch.arange(b), 3)]
    assert shard_sizes(4, 3) == [2, 1, 1]  # chunk would give [2, 2] and leave a replica without samples


def test_nested_structures_split_in_order_and_other_values_are_shared():
    x = torch.arange(10)
    batch = (Pair(x, x * 2), {"m": [x.float()], "k": "keep"}, None)
    sizes, shards = split(batch, 3)
    assert sizes == [4, 3, 3]
    assert isinstance(shards[1][0], Pair) and shards[1][0].z.tolist() == [8, 10, 12]
    assert shards[2][1]["m"][0].tolist() == [7.0, 8.0, 9.0] and shards[2][1]["k"] == "keep"
    assert torch.cat([s[0].x for s in shards]).equal(x)  # contiguous and in order
    assert split(x, 1)[1][0] is x  # one replica: untouched


def test_call_arguments_are_named_in_errors():
    x = torch.zeros(6, 2)
    sizes, shards = split_call((x,), {"mask": x[:, 0], "scale": 2.0}, 2)
    assert sizes == [3, 3] and shards[1][1]["scale"] == 2.0 and shards[1][1]["mask"].shape == (3,)
    with pytest.raises(BatchError, match=r"inputs\['mask'\]: expected dim 0 = 6 samples, as inputs\[0\] has, but got 5"):
        split_call((x,), {"mask": x[:5]}, 2)
    with pytest.raises(BatchError, match=r"inputs: expected a batch of at least 3 samples \(one per replica\), but got 2"):
        split_call((x[:2],), {}, 3)
    with pytest.raises(BatchError, match=r"inputs: expected at least one tensor.*\(1 positional and 0 keyword"):
        split_call((1.0,), {}, 2)
    with pytest.raises(BatchError, match=r"inputs\[0\]\[1\]: expected a tensor with a batch dimension"):
        split_call(((x, torch.tensor(3.0)),), {}, 2)


def test_targets_follow_the_inputs_sizes():
    y = torch.arange(7)
    assert [t.tolist() for t in split_like(y, [3, 2, 2])] == [[0, 1, 2], [3, 4], [5, 6]]
    with pytest.raises(BatchError, match=r"targets: expected dim 0 = 7 samples, the batch the outputs came from, but got 6"):
        split_like(y[:6], [3, 2, 2])
    with pytest.raises(BatchError, match="targets: expected tensors with dim 0 = 7"):
        split_like("labels", [3, 2, 2])


def test_to_device_leaves_tensors_already_there():
    x = torch.zeros(2)
    moved = to_device({"a": [x, 1]}, torch.device("cpu"))
    assert moved["a"][0] is x and moved["a"][1] == 1
