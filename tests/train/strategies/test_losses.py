"""gpucomm.train.strategies.losses: what a loss function may return."""

import pytest
import torch

from gpucomm.train.strategies.losses import scalar_loss


def test_a_one_element_float_loss_with_grad_comes_back_as_a_0d_tensor():
    w = torch.ones(1, requires_grad=True)
    loss = scalar_loss((w * 3.0).sum().reshape(1, 1))
    assert loss.shape == () and loss.item() == 3.0 and loss.requires_grad
    loss.backward()
    assert w.grad.tolist() == [3.0]  # still connected to the graph


@pytest.mark.parametrize("bad, got", [
    (1.5, "float"),
    (None, "NoneType"),
    (torch.ones(2, requires_grad=True), "tensor(shape=[2], dtype=torch.float32)"),
    (torch.ones((), dtype=torch.int64), "tensor(shape=[], dtype=torch.int64)"),
])
def test_anything_but_a_scalar_float_tensor_is_named_in_the_error(bad, got):
    with pytest.raises(ValueError) as info:
        scalar_loss(bad)
    assert str(info.value) == ("loss_fn: expected a scalar floating tensor (the mean over the batch), "
                               f"but got {got}")


def test_a_loss_without_grad_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"^loss_fn: the loss does not require grad; compute it from the model"):
        scalar_loss(torch.tensor(1.0))
