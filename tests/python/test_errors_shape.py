"""Bad input to the shape, indexing and linear-algebra ops: exception type and torch's message;
plus view/storage semantics (which ops view, which copy) and in-place on multi-output views."""

from __future__ import annotations

import re

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest


def x3() -> fg.Tensor:
    return fg.tensor(np.arange(60, dtype=np.float64).reshape(3, 4, 5))


def long(v):
    return fg.tensor(np.array(v, dtype=np.int64))


MULTI_VIEW = (
    "Output {n} of {op} is a view and is being modified inplace. This view is the output of a "
    "function that returns multiple views. Such functions do not allow the output views to be "
    "modified inplace. You should replace the inplace operation by an out-of-place one."
)


@pytest.mark.parametrize(
    "make,n,op",
    [
        (lambda y: y.unbind()[0], 0, "Unbind"),
        (lambda y: y.split([2, 2])[1], 1, "SplitWithSizes"),
        (lambda y: y.split(2)[1], 1, "Split"),
        (lambda y: y.chunk(2)[1], 1, "Split"),
    ],
)
def test_inplace_on_multi_output_view_raises(make, n, op):
    y = fg.randn(4, requires_grad=True) * 1
    v = make(y)
    with pytest.raises(RuntimeError, match=re.escape(MULTI_VIEW.format(n=n, op=op))):
        v.add_(1)


def test_inplace_on_multi_output_view_without_grad_is_allowed():
    y = fg.zeros(4)
    a, b = y.split(2)
    b.add_(1)
    npt.assert_array_equal(y.numpy(), [0, 0, 1, 1])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.split(2)[1],
        lambda x: x.chunk(2)[0],
        lambda x: x.unbind()[1],
        lambda x: x.narrow(0, 1, 2),
        lambda x: x.movedim(0, 1),
        lambda x: x.unflatten(0, (2, 2)),
        lambda x: x[:, :1].expand_as(x),
        lambda x: x.diagonal(),
        lambda x: x.view_as(x),
    ],
)
def test_views_share_storage_and_version(fn):
    x = fg.zeros(4, 4)
    v = fn(x)
    before = v._version
    x.add_(1)
    assert v._version == before + 1
    assert float(v.sum()) == v.numel()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.flip(0),
        lambda x: x.roll(1),
        lambda x: x.repeat(1, 1),
        lambda x: x.tile((1,)),
        lambda x: fg.cat([x]),
        lambda x: fg.stack([x]),
        lambda x: x[[0, 1]],
        lambda x: x.index_select(0, long([0])),
    ],
)
def test_copies_do_not_share_storage(fn):
    x = fg.zeros(4, 4)
    c = fn(x)
    x.add_(1)
    assert float(c.sum()) == 0.0


@pytest.mark.parametrize(
    "fn,exc,msg",
    [
        (
            lambda x: x[fg.tensor([0.0])],
            IndexError,
            "tensors used as indices must be long, int, byte or bool tensors",
        ),
        (
            lambda x: x[long([5])],
            IndexError,
            "index 5 is out of bounds for dimension 0 with size 3",
        ),
        (
            lambda x: x[:, long([-5])],
            IndexError,
            "index -5 is out of bounds for dimension 1 with size 4",
        ),
        (
            lambda x: x[[0, 1], [0, 1, 2]],
            IndexError,
            "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]",
        ),
        (lambda x: x[0, 0, 0, 0], IndexError, "too many indices for tensor of dimension 3"),
        (lambda x: x[3], IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
        (lambda x: x[-4], IndexError, "index -4 is out of bounds for dimension 0 with size 3"),
        (
            lambda x: x[fg.ones(2, 2, dtype=fg.bool)],
            IndexError,
            "The shape of the mask [2, 2] at index 0 does not match the shape of the indexed "
            "tensor [3, 4, 5] at index 0",
        ),
        (lambda x: x[..., ...], IndexError, "an index can only have a single ellipsis"),
        (
            lambda x: x.index_select(0, long([5])),
            IndexError,
            "index 5 is out of bounds for dimension 0 with size 3",
        ),
        (
            lambda x: x.index_select(0, fg.tensor([0.0])),
            RuntimeError,
            "index_select(): Expected dtype int32 or int64 for index",
        ),
        (
            lambda x: x.gather(0, long([[[5]]])),
            RuntimeError,
            "index 5 is out of bounds for dimension 0 with size 3",
        ),
        (
            lambda x: x.gather(0, fg.tensor([[[0.0]]])),
            RuntimeError,
            "gather(): Expected dtype int32/int64 for index",
        ),
        (
            lambda x: x.scatter(0, long([[[5]]]), 1.0),
            RuntimeError,
            "index 5 is out of bounds for dimension 0 with size 3",
        ),
        (
            lambda x: x.index_add(0, long([0]), fg.ones(2, 4, 5)),
            RuntimeError,
            "index_add_(): Number of indices (1) should be equal to source.size(dim): (2), "
            "for dim: 0",
        ),
        (
            lambda x: x.masked_select(fg.ones(3)),
            RuntimeError,
            "masked_select: expected BoolTensor for mask",
        ),
        (
            lambda x: x.masked_fill(fg.ones(5), 1.0),
            RuntimeError,
            "masked_fill_ only supports boolean masks, but got mask with dtype float",
        ),
        (
            lambda x: x.take_along_dim(long([1]), 0),
            RuntimeError,
            "torch.take_along_dim(): input and indices should have the same number of dimensions, "
            "but got 3 dimensions for input, and 1 dimensions for indices",
        ),
        (lambda x: fg.mm(x, x), RuntimeError, "mm: self must be a matrix, got 3-D tensor"),
        (
            lambda x: fg.mm(x[0], x[0]),
            RuntimeError,
            "mm: mat1 and mat2 shapes cannot be multiplied (4x5 and 4x5)",
        ),
        (lambda x: fg.bmm(x[0], x), RuntimeError, "batch1 must be a 3D tensor"),
        (
            lambda x: fg.bmm(x, x),
            RuntimeError,
            "Expected size for first two dimensions of batch2 "
            "tensor to be: [3, 5] but got: [3, 4].",
        ),
        (
            lambda x: fg.cat([x, x[0]]),
            RuntimeError,
            "Tensors must have same number of dimensions: got 3 and 2",
        ),
        (
            lambda x: fg.cat([x, x[:, :2]]),
            RuntimeError,
            "Sizes of tensors must match except in dimension 0. Expected size 4 but got size 2 for "
            "tensor number 1 in the list.",
        ),
        (lambda x: fg.cat([]), RuntimeError, "expected a non-empty list of Tensors"),
        (
            lambda x: fg.stack([x, x[:, :2]]),
            RuntimeError,
            "stack expects each tensor to be equal "
            "size, but got [3, 4, 5] at entry 0 and [3, 2, 5] at entry 1",
        ),
        (
            lambda x: x.split([1, 1]),
            RuntimeError,
            "split_with_sizes expects split_sizes to sum "
            "exactly to 3 (input tensor's size at dimension 0), but got split_sizes=[1, 1]",
        ),
        (lambda x: x.chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
        (
            lambda x: x.repeat(2),
            RuntimeError,
            "Number of dimensions of repeat dims can not be "
            "smaller than number of dimensions of tensor",
        ),
        (lambda x: x.trace(), RuntimeError, "trace: expected a matrix, but got tensor with dim 3"),
        (
            lambda x: fg.einsum("ij,jk->ik", x[0], x[0]),
            RuntimeError,
            "einsum(): subscript j has size 4 for operand 1 which does not broadcast with "
            "previously seen size 5",
        ),
        (
            lambda x: fg.einsum("ij->ij", x),
            RuntimeError,
            "einsum(): the number of subscripts in "
            "the equation (2) does not match the number of dimensions (3) for operand 0 and no "
            "ellipsis was given",
        ),
        (
            lambda x: x.flip(3),
            IndexError,
            "Dimension out of range (expected to be in range of [-3, 2], but got 3)",
        ),
        (
            lambda x: x.movedim(0, 5),
            IndexError,
            "Dimension out of range (expected to be in range of [-3, 2], but got 5)",
        ),
        (
            lambda x: x.unflatten(1, (3, 2)),
            RuntimeError,
            "unflatten: Provided sizes [3, 2] don't "
            "multiply up to the size of dim 1 (4) in the input tensor",
        ),
        (lambda x: x.diag(), RuntimeError, "diag(): Supports 1D or 2D tensors. Got 3D"),
        (
            lambda x: x[0].outer(x[0]),
            RuntimeError,
            "outer: Expected 1-D argument self, but got 2-D",
        ),
        (
            lambda x: x[0, 0].tril(),
            RuntimeError,
            "tril: input tensor must have at least 2 dimensions",
        ),
        (
            lambda x: x.broadcast_to((2, 4, 5)),
            RuntimeError,
            "The expanded size of the tensor (2) "
            "must match the existing size (3) at non-singleton dimension 0.",
        ),
    ],
)
def test_error_type_and_message(fn, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)):
        fn(x3())


def test_setitem_on_leaf_with_advanced_index_raises():
    w = fg.randn(3, 3, requires_grad=True)
    with pytest.raises(
        RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"
    ):
        w[[0]] = 1.0


def test_setitem_value_shape_mismatch():
    x = fg.zeros(3, 4)
    with pytest.raises(RuntimeError, match=re.escape("shape mismatch: value tensor of shape [3]")):
        x[[0, 1]] = fg.ones(3)


def test_advanced_index_placement_matches_numpy_and_torch_rules():
    x = x3()
    a = x.numpy()
    assert tuple(x[:, [0, 2], [1, 3]].shape) == a[:, [0, 2], [1, 3]].shape == (3, 2)
    assert tuple(x[[0, 1], :, [1, 3]].shape) == a[[0, 1], :, [1, 3]].shape == (2, 4)
    # torch applies ints as select first (NumPy would give (2, 4) here)
    assert tuple(x[0, :, [0, 1]].shape) == (4, 2)
    npt.assert_array_equal(x[x > 30].numpy(), a[a > 30])
    npt.assert_array_equal(x[1:, [3, 0]][..., ::2].numpy(), a[1:, [3, 0]][..., ::2])


def test_setitem_writes_and_bumps_version():
    x = fg.zeros(3, 4)
    x[[0, 2], [1, 3]] = fg.tensor([1.0, 2.0])
    x[x > 1.5] = 7.0
    want = np.zeros((3, 4))
    want[0, 1], want[2, 3] = 1.0, 7.0
    npt.assert_array_equal(x.numpy(), want)
    assert x._version == 2


def test_index_put_accumulates_duplicates():
    x = fg.zeros(3)
    x.index_put_((long([0, 0, 2]),), fg.tensor([1.0, 2.0, 3.0]), accumulate=True)
    npt.assert_array_equal(x.numpy(), [3.0, 0.0, 3.0])


def test_setitem_gradient_flows_to_value_and_base():
    w = fg.randn(3, 4, requires_grad=True, dtype=fg.float64)
    v = fg.randn(2, requires_grad=True, dtype=fg.float64)
    h = w * 1.0
    h[[0, 2], [1, 1]] = v
    (h * fg.arange(12, dtype=fg.float64).reshape(3, 4)).sum().backward()
    gw = np.arange(12.0).reshape(3, 4)
    gw[0, 1] = gw[2, 1] = 0.0
    npt.assert_allclose(w.grad.numpy(), gw)
    npt.assert_allclose(v.grad.numpy(), [1.0, 9.0])


def test_nonzero_as_tuple_indexes_back():
    x = fg.tensor([[0.0, 1.0], [2.0, 0.0]])
    idx = fg.nonzero(x, as_tuple=True)
    npt.assert_array_equal(x[idx].numpy(), [1.0, 2.0])
    assert x.nonzero().dtype == fg.int64


@pytest.mark.parametrize(
    "fn,exc,msg",
    [
        (
            lambda s: s.roll(1, 0),
            IndexError,
            "Dimension specified as 0 but tensor has no dimensions",
        ),
        (
            lambda s: s.unflatten(0, (1,)),
            RuntimeError,
            "Dimension specified as 0 but tensor has no",
        ),
        (
            lambda s: s.index_select(0, long([0, 0])),
            RuntimeError,
            "index_select(): Index to scalar can have only 1 value, got 2 value(s)",
        ),
        (lambda s: s.unbind(), IndexError, "Dimension specified as 0 but tensor has no dimensions"),
        (lambda s: s.split(1), RuntimeError, "split expects at least a 1-dimensional tensor"),
    ],
)
def test_zero_dim_errors(fn, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)):
        fn(fg.tensor(2.0))


def test_zero_dim_flip_movedim_nonzero_follow_torch():
    s = fg.tensor(2.0)
    assert s.flip(0).item() == 2.0
    assert s.movedim(0, 0).item() == 2.0
    (col,) = s.nonzero(as_tuple=True)
    npt.assert_array_equal(col.numpy(), [0])
    (col,) = fg.tensor(0.0).nonzero(as_tuple=True)
    assert tuple(col.shape) == (0,)


@pytest.mark.parametrize(
    "args, msg",
    [
        ((0, 6, 1), "maximum size for tensor at dimension 0 is 5 but size is 6"),
        ((0, -1, 1), "size is -1 but must be >= 0"),
        ((0, 2, 0), "step is 0 but must be > 0"),
        ((1, 2, 1), "Dimension out of range (expected to be in range of [-1, 0], but got 1)"),
    ],
)
def test_unfold_errors_follow_torch(args, msg):
    with pytest.raises((RuntimeError, IndexError), match=re.escape(msg)):
        fg.arange(5.0).unfold(*args)


def test_unfold_is_a_view_and_a_scalar_unfolds_to_one_element():
    x = fg.arange(6.0)
    w = x.unfold(0, 2, 2)
    x[0] = 9.0
    assert w[0, 0].item() == 9.0  # shares storage
    npt.assert_array_equal(fg.tensor(3.0).unfold(0, 1, 1).numpy(), [3.0])
    assert tuple(fg.tensor(3.0).unfold(0, 0, 1).shape) == (0,)
