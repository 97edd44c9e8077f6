"""Bad integer arguments (issue 10): a negative count or size, or a zero divisor, raises the
exception torch raises with torch's message (never PyO3's ``OverflowError`` or Python's
``ZeroDivisionError``), and leaves every tensor the caller holds as it was.

Messages are torch's ``TORCH_CHECK`` texts (aten/src/ATen/native: TensorShape.cpp,
Convolution.cpp, Pool.h, DilatedMaxPool2d.cpp, AveragePool2d.cpp, im2col_shape_check.h,
TensorFactories.cpp, RangeFactories.cpp, Onehot.cpp; torch/csrc: Module.cpp, Generator.cpp,
python_variable_indexing.h).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Tuple

import ferrograd as fg
import ferrograd.nn.functional as F
import numpy as np
import pytest

Case = Tuple[Callable[..., Any], type, str]


def _held(shape: Tuple[int, ...]) -> fg.Tensor:
    n = int(np.prod(shape))
    return fg.tensor(np.arange(n, dtype=np.float32).reshape(shape), requires_grad=True)


def _snapshot(t: fg.Tensor) -> Tuple[Any, ...]:
    return (tuple(t.shape), t.detach().numpy().copy(), t._version, t.grad is None)


def _assert_raises_untouched(fn: Callable[..., Any], exc: type, msg: str, *held: fg.Tensor):
    """``fn(*held)`` raises ``exc`` with exactly ``msg``; the tensors in ``held`` keep their
    shape, values and version, and get no gradient."""
    before = [_snapshot(t) for t in held]
    with pytest.raises(exc, match="^" + re.escape(msg) + "$"):
        fn(*held)
    for t, (shape, values, version, no_grad) in zip(held, before):
        assert tuple(t.shape) == shape
        np.testing.assert_array_equal(t.detach().numpy(), values)
        assert t._version == version
        assert (t.grad is None) == no_grad


# ----- narrow and the other views by count --------------------------------------------------

VIEWS = [
    (lambda x: x.narrow(0, 1, -1), RuntimeError, "narrow(): length must be non-negative."),
    (lambda x: fg.narrow(x, 1, 0, -2), RuntimeError, "narrow(): length must be non-negative."),
    (
        lambda x: x.narrow(0, 4, 1),
        IndexError,
        "start out of range (expected to be in range of [-3, 3], but got 4)",
    ),
    (
        lambda x: x.narrow(0, -4, 1),
        IndexError,
        "start out of range (expected to be in range of [-3, 3], but got -4)",
    ),
    (
        lambda x: x.narrow(0, 1, 5),
        RuntimeError,
        "start (1) + length (5) exceeds dimension size (3).",
    ),
    (
        lambda x: x.narrow(1, -1, 2),
        RuntimeError,
        "start (3) + length (2) exceeds dimension size (4).",
    ),
    (
        lambda x: x.sum().narrow(0, 0, -1),
        RuntimeError,
        "narrow() cannot be applied to a 0-dim tensor.",
    ),
    (
        lambda x: x.chunk(0),
        RuntimeError,
        "chunk expects `chunks` to be greater than 0, got: 0",
    ),
    (
        lambda x: fg.chunk(x, -2, 1),
        RuntimeError,
        "chunk expects `chunks` to be greater than 0, got: -2",
    ),
    (
        lambda x: x.split(-1),
        RuntimeError,
        "split expects split_size be non-negative, but got split_size=-1",
    ),
    (
        lambda x: fg.split(x, 0),
        RuntimeError,
        "split_size can only be 0 if dimension size is 0, but got dimension size of 3",
    ),
    (lambda x: x[::0], ValueError, "slice step cannot be zero"),
    (lambda x: x[:, 1:3:0], ValueError, "slice step cannot be zero"),
]


@pytest.mark.parametrize("fn,exc,msg", VIEWS)
def test_views_by_count_reject_bad_ints(fn, exc, msg):
    _assert_raises_untouched(fn, exc, msg, _held((3, 4)))


def test_narrow_accepts_torch_edge_values():
    x = _held((3, 4))
    assert tuple(x.narrow(0, 3, 0).shape) == (0, 4)  # start == size is an empty view
    assert tuple(x.narrow(0, -3, 3).shape) == (3, 4)
    np.testing.assert_array_equal(x.narrow(1, -2, 2).detach().numpy(), x.detach().numpy()[:, 2:])


# ----- repeat / tile --------------------------------------------------------------------------

REPEATS = [
    (
        lambda x: x.repeat(-1, 1),
        "Trying to create tensor with negative dimension -3: [-3, 4]",
    ),
    (
        lambda x: x.repeat(2, 2, -2),
        "Trying to create tensor with negative dimension -8: [2, 6, -8]",
    ),
    (
        lambda x: x.tile(-1),
        "Trying to create tensor with negative dimension -4: [3, -4]",
    ),
    (
        lambda x: fg.tile(x, (-2, 1)),
        "Trying to create tensor with negative dimension -6: [-6, 4]",
    ),
]


@pytest.mark.parametrize("fn,msg", REPEATS)
def test_repeat_reports_the_negative_target_size(fn, msg):
    _assert_raises_untouched(fn, RuntimeError, msg, _held((3, 4)))


def test_negative_repeat_of_an_empty_dim_is_empty_as_in_torch():
    assert tuple(fg.zeros(0, 2).repeat(-1, 1).shape) == (0, 2)


# ----- creation -------------------------------------------------------------------------------

CREATION = [
    (lambda: fg.zeros(-1, 2), "Trying to create tensor with negative dimension -1: [-1, 2]"),
    (lambda: fg.ones((2, -3)), "Trying to create tensor with negative dimension -3: [2, -3]"),
    (lambda: fg.empty(-1), "Trying to create tensor with negative dimension -1: [-1]"),
    (
        lambda: fg.full((2, -1, -2), 1.0),
        "Trying to create tensor with negative dimension -1: [2, -1, -2]",
    ),
    (lambda: fg.rand(3, -1), "Trying to create tensor with negative dimension -1: [3, -1]"),
    (lambda: fg.randn(-5), "Trying to create tensor with negative dimension -5: [-5]"),
    (
        lambda: fg.ones(2).new_zeros(-1, 2),
        "Trying to create tensor with negative dimension -1: [-1, 2]",
    ),
    (lambda: fg.linspace(0, 1, -1), "number of steps must be non-negative"),
    (lambda: fg._C._linspace(0.0, 1.0, -3, fg.float32), "number of steps must be non-negative"),
    (lambda: fg.eye(-1), "n must be greater or equal to 0, got -1"),
    (lambda: fg.eye(2, -3), "m must be greater or equal to 0, got -3"),
    (lambda: fg._C._eye(-2, 2, fg.float32), "n must be greater or equal to 0, got -2"),
    (lambda: fg.arange(0, 5, 0), "step must be nonzero"),
]


@pytest.mark.parametrize("fn,msg", CREATION)
def test_creation_rejects_negative_sizes_and_leaves_the_generator_alone(fn, msg):
    fg.manual_seed(7)
    expected = fg.rand(4).tolist()
    fg.manual_seed(7)
    with pytest.raises(RuntimeError, match="^" + re.escape(msg) + "$"):
        fn()
    assert fg.rand(4).tolist() == expected  # a failed factory draws nothing


# ----- convolution ----------------------------------------------------------------------------


def _conv2d(**kw: Any) -> Callable[..., Any]:
    return lambda x, w: F.conv2d(x, w, **kw)


def _conv1d(**kw: Any) -> Callable[..., Any]:
    return lambda x, w: F.conv1d(x[0], w[:, :, 0], **kw)


CONV = [
    (_conv2d(stride=0), "non-positive stride is not supported"),
    (_conv2d(stride=(1, 0)), "non-positive stride is not supported"),
    (_conv2d(stride=-2), "non-positive stride is not supported"),
    (_conv2d(padding=-1), "negative padding is not supported"),
    (_conv2d(padding=(0, -2)), "negative padding is not supported"),
    (_conv2d(dilation=0), "dilation should be greater than zero"),
    (_conv2d(dilation=(1, -1)), "dilation should be greater than zero"),
    (_conv2d(groups=0), "non-positive groups is not supported"),
    (_conv2d(groups=-1), "non-positive groups is not supported"),
    (_conv2d(padding="valid", stride=0), "non-positive stride is not supported"),
    (_conv1d(stride=0), "non-positive stride is not supported"),
    (_conv1d(padding=-1), "negative padding is not supported"),
    # torch 2.15 rejects a zero dilation only after the shape checks (negative ones before)
    (
        _conv1d(dilation=0),
        "Given groups=1, weight of size [3, 2, 2], expected input[2, 5, 5] to have 2 channels, "
        "but got 5 channels instead",
    ),
    # torch checks groups before padding, padding before stride, stride before dilation
    (_conv2d(groups=0, stride=0), "non-positive groups is not supported"),
    (_conv2d(padding=-1, stride=0, dilation=0), "negative padding is not supported"),
    (_conv2d(stride=0, dilation=0), "non-positive stride is not supported"),
]


@pytest.mark.parametrize("fn,msg", CONV)
def test_conv_geometry(fn, msg):
    _assert_raises_untouched(fn, RuntimeError, msg, _held((1, 2, 5, 5)), _held((3, 2, 2, 2)))


# ----- pooling --------------------------------------------------------------------------------

POOL = [
    (lambda x: F.max_pool2d(x, 2, 0), "stride should not be zero"),
    (lambda x: F.max_pool2d(x, 2, (1, 0)), "stride should not be zero"),
    # stride defaults to the kernel size, so a zero kernel is first a zero stride (as torch)
    (lambda x: F.max_pool2d(x, 0), "stride should not be zero"),
    (
        lambda x: F.max_pool2d(x, 0, 1),
        "kernel size should be greater than zero, but got kH: 0 kW: 0",
    ),
    (
        lambda x: F.max_pool2d(x, (2, -1)),
        "kernel size should be greater than zero, but got kH: 2 kW: -1",
    ),
    (
        lambda x: F.max_pool2d(x, 2, -1),
        "stride should be greater than zero, but got dH: -1 dW: -1",
    ),
    (lambda x: F.max_pool2d(x, 2, 1, -1), "pad must be non-negative, but got pad: -1"),
    (lambda x: F.max_pool2d(x, 2, 1, (0, -1)), "pad must be non-negative, but got pad: -1"),
    (
        lambda x: F.max_pool2d(x, 2, 1, 0, 0),
        "dilation should be greater than zero, but got dilationH: 0 dilationW: 0",
    ),
    (
        lambda x: F.max_pool2d(x, 2, 1, 0, (1, -1)),
        "dilation should be greater than zero, but got dilationH: 1 dilationW: -1",
    ),
    (lambda x: F.avg_pool2d(x, 2, 0), "stride should not be zero"),
    (lambda x: F.avg_pool2d(x, 0), "stride should not be zero"),
    (lambda x: F.avg_pool2d(x, 2, 1, -1), "pad must be non-negative, but got pad: -1"),
    (
        lambda x: F.avg_pool2d(x, -1, 1),
        "kernel size should be greater than zero, but got kH: -1 kW: -1",
    ),
    (lambda x: F.avg_pool2d(x, 2, divisor_override=0), "divisor must be not zero"),
    # torch checks the divisor before the geometry
    (lambda x: F.avg_pool2d(x, 2, 0, divisor_override=0), "divisor must be not zero"),
]


@pytest.mark.parametrize("fn,msg", POOL)
def test_pool_geometry(fn, msg):
    _assert_raises_untouched(fn, RuntimeError, msg, _held((1, 2, 5, 5)))


# ----- unfold / fold and their primitives -----------------------------------------------------

WINDOWS = [
    (
        lambda x: F.unfold(x, 0),
        "kernel size should be greater than zero, but got kernel_height: 0 kernel_width: 0",
    ),
    (
        lambda x: F.unfold(x, (2, -1)),
        "kernel size should be greater than zero, but got kernel_height: 2 kernel_width: -1",
    ),
    (
        lambda x: F.unfold(x, 2, dilation=0),
        "dilation should be greater than zero, but got dilation_height: 0 dilation_width: 0",
    ),
    (
        lambda x: F.unfold(x, 2, padding=(-1, 0)),
        "padding should be non-negative, but got pad_height: -1 pad_width: 0",
    ),
    (
        lambda x: F.unfold(x, 2, stride=(1, 0)),
        "stride should be greater than zero, but got stride_height: 1 stride_width: 0",
    ),
    (
        # im2col checks dilation before padding before stride
        lambda x: F.unfold(x, 2, dilation=0, padding=-1, stride=0),
        "dilation should be greater than zero, but got dilation_height: 0 dilation_width: 0",
    ),
    (
        lambda x: fg._C._nn_im2col(x, [2, 2], [1, 1], [0, 0], [0, -1]),
        "stride should be greater than zero, but got stride_height: 0 stride_width: -1",
    ),
    (
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :, :16], 5, 0),
        "kernel size should be greater than zero, but got kernel_height: 0 kernel_width: 0",
    ),
    (
        # col2im checks stride before dilation before padding
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :, :16], 5, 2, dilation=0, padding=-1, stride=0),
        "stride should be greater than zero, but got stride_height: 0 stride_width: 0",
    ),
    (
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :, :16], 5, 2, dilation=-1, padding=-1),
        "dilation should be greater than zero, but got dilation_height: -1 dilation_width: -1",
    ),
    (
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :, :16], 5, 2, padding=(0, -2)),
        "padding should be non-negative, but got pad_height: 0 pad_width: -2",
    ),
    (
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :, :9], -1, 2),
        "Given output_size=(-1, -1), kernel_size=(2, 2), dilation=(1, 1), padding=(0, 0), "
        "stride=(1, 1), expected size of input's dimension 2 to match the calculated number of "
        "sliding blocks -2 * -2 = 4, but got input.size(2)=9.",
    ),
    (
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :, :1], 0, 2),
        "Given output_size=(0, 0), kernel_size=(2, 2), dilation=(1, 1), padding=(0, 0), "
        "stride=(1, 1), calculated shape of the array of sliding blocks as (-1, -1), which is "
        "too small (non-positive)",
    ),
    (
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :1, :4], 0, 1, padding=1),
        "Expected output spatial size to be positive, but got: output_size=(0, 0).",
    ),
    (
        lambda x: F.fold(x.reshape(1, 4, 25)[:, :, :9], 4, (3, 2)),
        "Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
        "but got input.size(1)=4 and kernel_size=(3, 2).",
    ),
]


@pytest.mark.parametrize("fn,msg", WINDOWS)
def test_unfold_fold_geometry(fn, msg):
    _assert_raises_untouched(fn, RuntimeError, msg, _held((1, 4, 5, 5)))


# ----- one_hot --------------------------------------------------------------------------------

ONE_HOT = [
    (lambda t: F.one_hot(t[:0], 0), "Can not infer total number of classes from empty tensor."),
    (lambda t: F.one_hot(t[:0], -2), "Can not infer total number of classes from empty tensor."),
    (lambda t: F.one_hot(t[:0]), "Can not infer total number of classes from empty tensor."),
    (lambda t: F.one_hot(t, -2), "Class values must be smaller than num_classes."),
    (lambda t: F.one_hot(t, 0), "Class values must be smaller than num_classes."),
]


@pytest.mark.parametrize("fn,msg", ONE_HOT)
def test_one_hot_num_classes(fn, msg):
    t = fg.tensor([0, 2, 1])
    before = t.tolist()
    with pytest.raises(RuntimeError, match="^" + re.escape(msg) + "$"):
        fn(t)
    assert t.tolist() == before


def test_one_hot_of_empty_with_positive_num_classes_is_empty():
    assert tuple(F.one_hot(fg.tensor([], dtype=fg.int64), 3).shape) == (0, 3)


# ----- global settings: threads and seeds -----------------------------------------------------


@pytest.mark.parametrize("n", [0, -1, -(2**40)])
def test_set_num_threads_rejects_non_positive(n):
    kept = fg.get_num_threads()
    with pytest.raises(RuntimeError, match="^set_num_threads expects a positive integer$"):
        fg.set_num_threads(n)
    assert fg.get_num_threads() == kept


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1, 2**100])
def test_manual_seed_out_of_range_keeps_the_generator(seed):
    fg.manual_seed(3)
    expected = fg.rand(3).tolist()
    fg.manual_seed(3)
    with pytest.raises(RuntimeError, match="^Overflow when unpacking long$"):
        fg.manual_seed(seed)
    assert fg.rand(3).tolist() == expected


@pytest.mark.parametrize("negative,unsigned", [(-1, 2**64 - 1), (-(2**63), 2**63), (-5, 2**64 - 5)])
def test_manual_seed_takes_negative_seeds_as_twos_complement(negative, unsigned):
    fg.manual_seed(negative)
    a = fg.rand(4).tolist()
    fg.manual_seed(unsigned)
    assert fg.rand(4).tolist() == a
