"""gpucomm.parallel.loss: replicas weighted by their share, the gradient factor, and loss checks."""

import pytest
import torch

from gpucomm.parallel.loss import check_loss, combine, weights

CPU = torch.device("cpu")


def test_mean_weights_are_shares_and_equal_shards_multiply_nothing():
    assert weights([4, 3, 3], "mean") == (0.4, 0.3, 0.3) and weights([4, 3, 3], "sum") == (1.0, 1.0, 1.0)
    losses = [torch.tensor(1.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)]
    total = combine(losses, [2, 2], "mean", 2, CPU)
    assert total.item() == 2.0
    total.backward()
    assert [float(t.grad) for t in losses] == [1.0, 1.0]  # scale 2 x share 1/2: exactly 1


def test_uneven_mean_and_sum():
    losses = [torch.tensor(1.0, requires_grad=True), torch.tensor(4.0, requires_grad=True)]
    total = combine(losses, [3, 1], "mean", 2, CPU)
    assert total.item() == pytest.approx(0.75 * 1 + 0.25 * 4)
    total.backward()
    assert [float(t.grad) for t in losses] == [1.5, 0.5]  # 2 * 3/4, 2 * 1/4
    losses = [torch.tensor(1.0, requires_grad=True), torch.tensor(4.0, requires_grad=True)]
    total = combine(losses, [3, 1], "sum", 4, CPU)  # 2 replicas x 2 processes
    total.backward()
    assert total.item() == 5.0 and [float(t.grad) for t in losses] == [4.0, 4.0]


def test_one_replica_returns_its_loss():
    loss = torch.tensor(2.0, requires_grad=True)
    assert combine([loss], [5], "mean", 1, CPU) is loss


def test_check_loss():
    assert check_loss(torch.ones(1, 1), 0).shape == ()
    with pytest.raises(TypeError, match=r"loss_fn: expected a scalar tensor \(replica 2's loss\), but got float"):
        check_loss(1.0, 2)
    with pytest.raises(ValueError, match=r"but got shape \[3\] torch.float32; reduce it"):
        check_loss(torch.ones(3), 0)
    with pytest.raises(ValueError, match="torch.int64"):
        check_loss(torch.tensor(1), 0)
