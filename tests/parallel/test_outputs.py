"""gpucomm.parallel.outputs: PerReplica, and the gather (structures, 0-dim values, its gradient factor)."""

import dataclasses

import torch

from gpucomm.parallel.outputs import PerReplica, gather

CPU = torch.device("cpu")


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    loss: torch.Tensor
    name: str = "out"


def test_gather_concatenates_structures_and_stacks_scalars():
    a, b = torch.ones(2, 3), torch.zeros(1, 3)
    got = gather([Out(a, torch.tensor(1.0)), Out(b, torch.tensor(2.0))], CPU)
    assert got.logits.shape == (3, 3) and got.loss.tolist() == [1.0, 2.0] and got.name == "out"
    got = gather([{"x": (a, None)}, {"x": (b, None)}], CPU)
    assert got["x"][0].shape == (3, 3) and got["x"][1] is None


def test_gradient_through_a_gather_is_scaled_by_the_replica_count():
    """The all-reduce averages over replicas, so a gather hands each its gradient times their number."""
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(1, requires_grad=True)
    per = PerReplica([a * 1, b * 1], [CPU, CPU], [2, 1], grad_scale=2)
    per.gather().sum().backward()
    assert a.grad.tolist() == [2.0, 2.0] and b.grad.tolist() == [2.0]


def test_per_replica_is_a_sequence():
    per = PerReplica([1, 2, 3], [CPU] * 3, [4, 3, 3])
    assert len(per) == 3 and list(per) == [1, 2, 3] and per[-1] == 3
    assert repr(per) == "PerReplica(3 replicas on ['cpu', 'cpu', 'cpu'], samples [4, 3, 3])"
    one = torch.zeros(2)
    assert PerReplica([one], [CPU], [2]).gather() is one  # nothing to move
