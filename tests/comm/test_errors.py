"""Bad input: every error condition torch.cuda.comm has (and the added collectives' own), on CPU devices.

Each case names the exception type and a fragment of the message that must appear: the argument's
name and what was expected.  A second test checks that a failing call leaves ``out`` untouched.  Every
case runs twice: as on a machine without torch.cuda.comm's C++ loops, and with them (CPU stand-ins that
check as the real ones do, ``tests/_torch_loops.py``), where plain ``broadcast(out=)`` and
``scatter(out=)`` hand calls to them and diagnose only what they refuse: the message must still be ours,
the loop must not have run, and nothing may be written.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import gpucomm.comm as c
from gpucomm.testing.markers import requires_gpus

CPU = torch.device("cpu")
C3 = ["cpu", "cpu", "cpu"]


def t(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


@pytest.fixture(params=["checked", "torch_loops"])
def loops(request):
    """None (no torch loops, as on a CPU build), or the list of torch loops that ran (stand-ins installed)."""
    return request.getfixturevalue("torch_loops") if request.param == "torch_loops" else None


BAD = [
    # broadcast
    ("broadcast_neither", lambda: c.broadcast(t(3)), TypeError, "exactly one of 'devices' and 'out'"),
    ("broadcast_both", lambda: c.broadcast(t(3), C3, out=[t(3)]), TypeError, "but got both"),
    ("broadcast_not_tensor", lambda: c.broadcast([1, 2], C3), TypeError, "tensor: expected a torch.Tensor"),
    ("broadcast_out_shape", lambda: c.broadcast(t(3), out=[t(3), t(4)]), ValueError, "out[1]: expected shape [3]"),
    ("broadcast_negative_device", lambda: c.broadcast(t(3), [-1]), ValueError, "non-negative device index"),
    ("broadcast_cuda_without_gpu", lambda: c.broadcast(t(3), ["cpu", "cuda:99"]), ValueError, "devices[1]"),
    ("broadcast_device_without_index", lambda: c.broadcast(t(3), ["cuda"]), ValueError,
     "devices[0]: expected a CUDA device with an index"),
    ("scatter_device_without_index", lambda: c.scatter(t(3), [torch.device("cuda")]), ValueError,
     "devices[0]: expected a CUDA device with an index"),
    ("all_reduce_out_on_meta", lambda: c.all_reduce([t(2), t(2)], out=[t(2), t(2).to("meta")]), ValueError,
     "out[1]: expected a tensor on a 'cpu' or 'cuda' device"),
    ("broadcast_devices_not_list", lambda: c.broadcast(t(3), "cpu"), TypeError, "devices: expected a sequence"),
    ("broadcast_empty_devices", lambda: c.broadcast(t(3), []), ValueError, "at least one device"),
    ("broadcast_bad_device_string", lambda: c.broadcast(t(3), ["gpu7"]), ValueError, "devices[0]"),
    ("broadcast_out_empty", lambda: c.broadcast(t(3), out=[]), ValueError, "out: expected at least one tensor"),
    # broadcast_coalesced
    ("coalesced_wrong_device", lambda: c.broadcast_coalesced([t(2), t(2).to("meta")], C3), ValueError,
     "tensors[1]"),
    ("coalesced_buffer_size", lambda: c.broadcast_coalesced([t(2)], C3, buffer_size=0), ValueError, "buffer_size"),
    ("coalesced_non_tensor", lambda: c.broadcast_coalesced([t(2), 3], C3), TypeError, "tensors[1]"),
    # scatter
    ("scatter_neither", lambda: c.scatter(t(3)), TypeError, "exactly one of 'devices' and 'out'"),
    ("scatter_devices_and_out", lambda: c.scatter(t(3), C3, out=[t(3)]), TypeError, "'devices' must not"),
    ("scatter_chunk_sizes_and_out", lambda: c.scatter(t(3), chunk_sizes=[3], out=[t(3)]), TypeError,
     "'chunk_sizes' must not"),
    ("scatter_chunk_sizes_length", lambda: c.scatter(t(4), ["cpu", "cpu"], chunk_sizes=[4]), ValueError,
     "chunk_sizes: expected 2 sizes"),
    ("scatter_chunk_sizes_sum", lambda: c.scatter(t(4), ["cpu", "cpu"], chunk_sizes=[1, 2]), ValueError,
     "sum to 3"),
    ("scatter_chunk_size_negative", lambda: c.scatter(t(4), ["cpu", "cpu"], chunk_sizes=[5, -1]), ValueError,
     "chunk_sizes[1]"),
    ("scatter_chunk_sizes_not_ints", lambda: c.scatter(t(4), ["cpu", "cpu"], chunk_sizes=[2.0, 2]), TypeError,
     "chunk_sizes[0]: expected an int"),
    ("scatter_dim_out_of_range", lambda: c.scatter(t(2, 3), C3, dim=2), ValueError, "dim: expected a dimension"),
    ("scatter_dim_not_int", lambda: c.scatter(t(2, 3), C3, dim="0"), TypeError, "dim: expected an int"),
    ("scatter_zero_dim", lambda: c.scatter(torch.tensor(1.0), C3), ValueError, "at least one dimension"),
    ("scatter_empty_devices", lambda: c.scatter(t(3), []), ValueError, "devices: expected at least one device"),
    ("scatter_out_total", lambda: c.scatter(t(4, 2), out=[t(1, 2), t(2, 2)]), ValueError, "summing to"),
    ("scatter_out_shape", lambda: c.scatter(t(4, 2), out=[t(2, 3), t(2, 2)]), ValueError, "out[0]"),
    ("scatter_out_ndim", lambda: c.scatter(t(4, 2), out=[t(4)]), ValueError, "out[0]"),
    ("scatter_streams_length", lambda: c.scatter(t(3), C3, streams=[None]), ValueError, "streams: expected 3"),
    ("scatter_streams_type", lambda: c.scatter(t(3), C3, streams=[None, None, "s"]), TypeError, "streams[2]"),
    ("scatter_sparse", lambda: c.scatter(t(4).to_sparse(), C3), ValueError, "dense"),
    # gather
    ("gather_empty", lambda: c.gather([]), ValueError, "tensors: expected at least one tensor"),
    ("gather_bare_tensor", lambda: c.gather(t(3)), TypeError, "wrap a single tensor"),
    ("gather_ndim", lambda: c.gather([t(2, 3), t(6)]), ValueError, "tensors[1]: expected 2 dimensions"),
    ("gather_shape", lambda: c.gather([t(2, 3), t(2, 4)]), ValueError, "tensors[1]: expected shape [2, 3]"),
    ("gather_out_and_destination", lambda: c.gather([t(2)], destination="cpu", out=t(2)), TypeError,
     "'destination' must not"),
    ("gather_out_shape", lambda: c.gather([t(2), t(3)], out=t(6)), ValueError, "out: expected shape [5]"),
    ("gather_dim_range", lambda: c.gather([t(2), t(3)], dim=1), ValueError, "dim: expected a dimension"),
    ("gather_zero_dim", lambda: c.gather([torch.tensor(1.0)] * 2), ValueError, "at least one dimension"),
    ("gather_negative_destination", lambda: c.gather([t(2)], destination=-2), ValueError, "non-negative"),
    ("gather_non_tensor", lambda: c.gather([t(2), None]), TypeError, "tensors[1]"),
    # reduce_add
    ("reduce_add_shape", lambda: c.reduce_add([t(3), t(4)]), ValueError, "inputs[1]: expected shape [3]"),
    ("reduce_add_dtype", lambda: c.reduce_add([t(3), t(3, dtype=torch.int64)]), ValueError,
     "inputs[1]: expected dtype torch.float32"),
    ("reduce_add_empty", lambda: c.reduce_add([]), ValueError, "inputs: expected at least one tensor"),
    ("reduce_add_coalesced_lengths", lambda: c.reduce_add_coalesced([[t(2)], [t(2), t(2)]]), ValueError,
     "inputs[1]: expected 1 tensors"),
    ("reduce_add_coalesced_bare", lambda: c.reduce_add_coalesced(t(2)), TypeError, "inputs: expected a sequence"),
    # the added collectives
    ("all_reduce_op", lambda: c.all_reduce([t(2), t(2)], "mean"), ValueError, "unknown reduction op 'mean'"),
    ("all_reduce_op_type", lambda: c.all_reduce([t(2), t(2)], 3), TypeError, "op: expected a str"),
    ("all_reduce_avg_int", lambda: c.all_reduce([t(2, dtype=torch.int32)] * 2, "avg"), ValueError,
     "op='avg' needs a floating-point dtype"),
    ("all_reduce_out_length", lambda: c.all_reduce([t(2), t(2)], out=[t(2)]), ValueError,
     "out: expected 2 tensors"),
    ("all_reduce_out_dtype", lambda: c.all_reduce([t(2), t(2)], out=[t(2), t(2, dtype=torch.float64)]), ValueError,
     "out[1]: expected dtype torch.float32"),
    ("reduce_needs_destination", lambda: c.reduce([t(2), t(2)], None), TypeError, "destination device or out="),
    ("reduce_destination_vs_out", lambda: c.reduce([t(2), t(2)], "cuda:0", out=t(2)), ValueError, "destination"),
    ("reduce_out_shape", lambda: c.reduce([t(2), t(2)], None, out=t(3)), ValueError, "out[0]: expected shape [2]"),
    ("reduce_scatter_divisible", lambda: c.reduce_scatter([t(5), t(5)]), ValueError,
     "divides into n=2 equal chunks"),
    ("reduce_scatter_out_shape", lambda: c.reduce_scatter([t(4), t(4)], out=[t(2), t(4)]), ValueError,
     "out[1]: expected shape [2]"),
    ("all_gather_dtype", lambda: c.all_gather([t(2), t(2, dtype=torch.int64)]), ValueError, "tensors[1]"),
    ("all_gather_out_shape", lambda: c.all_gather([t(2), t(2)], out=[t(4), t(5)]), ValueError,
     "out[1]: expected shape [4]"),
    ("all_to_all_not_square", lambda: c.all_to_all([[t(1), t(1)], [t(1)]]), ValueError,
     "tensor_lists[1]: expected 2 tensors"),
    ("all_to_all_bare", lambda: c.all_to_all(t(2)), TypeError, "tensor_lists: expected a list"),
    ("all_to_all_out_shape", lambda: c.all_to_all([[t(1), t(2)], [t(1), t(2)]],
                                                  out=[[t(1), t(1)], [t(2), t(1)]]), ValueError, "out[1][1]"),
    # the one-pass routes (torch's kernels check what they check; ours name what they refuse)
    ("all_reduce_inputs_on_meta", lambda: c.all_reduce([t(2).to("meta")] * 2), ValueError,
     "tensors[0]: expected a tensor on a 'cpu' or 'cuda' device"),
    ("gather_inputs_on_meta", lambda: c.gather([t(2).to("meta")] * 2, out=t(4).to("meta")), ValueError,
     "tensors[0]: expected a tensor on a 'cpu' or 'cuda' device"),
    ("reduce_out_requires_grad", lambda: c.reduce([t(2), t(2)], None, out=t(2).requires_grad_()), ValueError,
     "out[0]: expected a tensor that does not require grad"),
    ("gather_input_requires_grad", lambda: c.gather([t(2).requires_grad_(), t(2)], out=t(4)), ValueError,
     "tensors[0]: expected a tensor that does not require grad"),
    ("all_reduce_input_requires_grad", lambda: c.all_reduce([t(2), t(2).requires_grad_()], out=[t(2), t(2)]),
     ValueError, "tensors[1]: expected a tensor that does not require grad"),
    ("reduce_scatter_out_requires_grad",
     lambda: c.reduce_scatter([t(4), t(4)], out=[t(2), t(2).requires_grad_()]), ValueError,
     "out[1]: expected a tensor that does not require grad"),
    ("send_recv_out_shape", lambda: c.send_recv([t(2), t(3)], out=[t(2), t(3)]), ValueError, "out[0]: expected"),
]


@pytest.mark.parametrize("name,call,exc,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_a_named_error(name, call, exc, fragment, loops):
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value), f"{name}: {fragment!r} not in {str(info.value)!r}"
    assert not loops, f"{name}: torch's loop ran on a refused call"


def test_at_least_25_bad_input_cases():
    assert len(BAD) >= 25


OUT_CASES = [
    ("broadcast", lambda outs: c.broadcast(t(3), out=outs), lambda: [torch.full((3,), 7.0), torch.full((4,), 7.0)]),
    ("scatter", lambda outs: c.scatter(t(4), out=outs), lambda: [torch.full((2,), 7.0), torch.full((3,), 7.0)]),
    ("all_reduce", lambda outs: c.all_reduce([t(3), t(3)], out=outs),
     lambda: [torch.full((3,), 7.0), torch.full((3,), 7.0, dtype=torch.float64)]),
    ("all_gather", lambda outs: c.all_gather([t(2), t(2)], out=outs),
     lambda: [torch.full((4,), 7.0), torch.full((3,), 7.0)]),
    ("reduce_scatter", lambda outs: c.reduce_scatter([t(4), t(4)], op="avg", out=outs),
     lambda: [torch.full((2,), 7.0), torch.full((3,), 7.0)]),
    ("reduce", lambda outs: c.reduce([t(3).requires_grad_(), t(3)], None, out=outs[0]),
     lambda: [torch.full((3,), 7.0)]),
    ("gather", lambda outs: c.gather([t(3), t(3).requires_grad_()], out=outs[0]),
     lambda: [torch.full((6,), 7.0)]),
    ("all_to_all", lambda outs: c.all_to_all([[t(1), t(1)], [t(1), t(1)]], out=[outs[:2], [outs[2], t(5)]]),
     lambda: [torch.full((1,), 7.0)] * 3),
]


@pytest.mark.parametrize("name,call,make", OUT_CASES, ids=[o[0] for o in OUT_CASES])
def test_failed_call_leaves_outputs_untouched(name, call, make, loops):
    outs = make()
    with pytest.raises(ValueError):
        call(outs)
    for o in outs:
        assert torch.all(o == 7.0), f"{name}: an output was written before the error"


def test_gather_minus_one_warns_like_torch():
    with pytest.warns(FutureWarning, match="Using -1 to represent CPU tensor is deprecated"):
        r = c.gather([t(2), t(2)], destination=-1)
    assert r.device == CPU and r.shape == (4,)


def test_gather_cpu_string_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c.gather([t(2), t(2)], destination="cpu")


@requires_gpus(1)
def test_reduce_add_destination_must_hold_an_input():
    with pytest.raises(ValueError, match="destination: expected a device that holds one of the inputs"):
        c.reduce_add([t(2), t(2)], destination="cuda:0")


def test_reduce_add_coalesced_names_the_mismatched_position():
    with pytest.raises(ValueError, match=r"inputs\[1\]\[1\]: expected shape \[3\] \(that of inputs\[0\]\[1\]\)"):
        c.reduce_add_coalesced([[t(2), t(3)], [t(2), t(4)]])


def _overlapping(k: int, width: int = 4) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """k outputs of ``width`` elements in one buffer, out[1] shifted to overlap out[0] by one element."""
    base = torch.full((width * k,), -1.0)
    outs = [base[i * width:(i + 1) * width] for i in range(k)]
    outs[1] = base[width - 1:2 * width - 1]
    return base, outs


@pytest.mark.parametrize("name", ["all_reduce", "reduce_scatter", "all_gather", "scatter", "broadcast",
                                  "send_recv", "all_to_all", "all_to_all_v"])
def test_outputs_that_overlap_each_other_are_refused_before_any_write(name, loops):
    ins = [torch.arange(4.0) + 10 * i for i in range(2)]
    calls = {
        "all_reduce": lambda outs: c.all_reduce(ins, out=outs),
        "reduce_scatter": lambda outs: c.reduce_scatter([torch.arange(8.0)] * 2, out=outs),
        "all_gather": lambda outs: c.all_gather([torch.arange(2.0)] * 2, out=outs),
        "scatter": lambda outs: c.scatter(torch.arange(8.0), out=outs),
        "broadcast": lambda outs: c.broadcast(ins[0], out=outs),
        "send_recv": lambda outs: c.send_recv(ins, out=outs),
        "all_to_all": lambda outs: c.all_to_all([[x[:2], x[2:]] for x in ins],
                                                out=[[o[:2], o[2:]] for o in outs]),
        "all_to_all_v": lambda outs: c.all_to_all_v(ins, [[2, 2], [2, 2]], out=outs),
    }
    base, outs = _overlapping(2)
    with pytest.raises(ValueError, match=r"out\[1\]\S*: expected a tensor that does not overlap out\[0\]"):
        calls[name](outs)
    assert (base == -1).all(), name  # nothing was written
    assert not loops


def test_the_same_output_twice_is_allowed_where_every_output_gets_the_same_value():
    out = torch.zeros(4)
    assert c.all_reduce([torch.ones(4), torch.ones(4)], out=[out, out])[0] is out
    assert torch.equal(out, torch.full((4,), 2.0))
    with pytest.raises(ValueError, match=r"out\[1\]: expected a tensor that does not overlap out\[0\]"):
        c.reduce_scatter([torch.ones(8)] * 2, out=[out, out])
