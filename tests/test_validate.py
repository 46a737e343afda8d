"""gpucomm._validate: the shared argument checks and the one message pattern they build."""

import pytest
import torch

from gpucomm._validate import (
    check_same_dtype,
    check_tensor,
    check_tensor_list,
    describe,
    fail_type,
    fail_value,
)


def test_describe_echoes_tensors_by_shape_dtype_device_and_layout():
    assert describe(torch.zeros(2, 3)) == "tensor(shape=[2, 3], dtype=torch.float32, device=cpu)"
    sparse = torch.zeros(2, 2).to_sparse()
    assert describe(sparse).endswith("layout=torch.sparse_coo)")


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_describe_names_nested_tensors_without_a_shape():
    nt = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    assert describe(nt) == "nested tensor(2 components, dtype=torch.float32, device=cpu)"


def test_describe_cuts_long_reprs_to_80_characters():
    text = describe("x" * 200)
    assert len(text) == 80 and text.endswith("...")
    assert describe([1, 2]) == "[1, 2]"


def test_fail_type_builds_one_line_naming_argument_expected_got_and_fix():
    err = fail_type("inputs", "a list", 3, "wrap it")
    assert isinstance(err, TypeError)
    assert str(err) == "inputs: expected a list, but got int 3; wrap it"
    assert str(fail_type("x", "a list", None)) == "x: expected a list, but got NoneType None"


def test_fail_value_builds_a_value_error_with_optional_fix():
    err = fail_value("dim", "0 or 1", "5", "pass dim=0")
    assert isinstance(err, ValueError) and str(err) == "dim: expected 0 or 1, but got 5; pass dim=0"
    assert str(fail_value("dim", "0 or 1", "5")) == "dim: expected 0 or 1, but got 5"


def test_check_tensor_returns_the_tensor_or_raises_type_error():
    t = torch.ones(1)
    assert check_tensor(t, "t") is t
    with pytest.raises(TypeError, match=r"^t: expected a torch.Tensor, but got list \[1\]$"):
        check_tensor([1], "t")


def test_check_tensor_list_accepts_tuples_and_returns_a_list():
    a, b = torch.ones(1), torch.zeros(1)
    out = check_tensor_list((a, b), "xs")
    assert isinstance(out, list) and out[0] is a and out[1] is b
    assert check_tensor_list([], "xs", allow_empty=True) == []


def test_check_tensor_list_rejects_a_single_tensor_with_the_fix():
    with pytest.raises(TypeError, match=r"^xs: expected a sequence of tensors .*; wrap a single tensor in a list"):
        check_tensor_list(torch.ones(2), "xs")


@pytest.mark.parametrize("bad", ["ab", b"ab", 5, {"a": 1}])
def test_check_tensor_list_rejects_strings_and_non_sequences(bad):
    with pytest.raises(TypeError, match=r"^xs: expected a sequence of tensors \(one per participant\)"):
        check_tensor_list(bad, "xs")


def test_check_tensor_list_rejects_empty_and_names_the_bad_item():
    with pytest.raises(ValueError, match=r"^xs: expected at least one tensor, but got an empty sequence; "):
        check_tensor_list([], "xs")
    with pytest.raises(TypeError, match=r"^xs\[1\]: expected a torch.Tensor, but got int 3$"):
        check_tensor_list([torch.ones(1), 3], "xs")


def test_check_same_dtype_returns_the_dtype_or_names_the_first_mismatch():
    assert check_same_dtype([torch.ones(1), torch.ones(2)], "xs") == torch.float32
    bad = [torch.ones(1), torch.ones(1), torch.ones(1, dtype=torch.int64)]
    with pytest.raises(ValueError, match=r"^xs\[2\]: expected dtype torch.float32 \(the dtype of xs\[0\]\), "
                                         r"but got dtype torch.int64; cast every tensor"):
        check_same_dtype(bad, "xs")
