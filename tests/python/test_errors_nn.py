"""Bad input to ``nn.functional`` and the nn primitives: exception type and message."""

from __future__ import annotations

import ferrograd as fg
import ferrograd.nn.functional as F
import pytest


def r(*shape):
    return fg.randn(*shape, dtype=fg.float64)


def idx(*vals):
    return fg.tensor(list(vals))


def test_conv_channel_and_group_mismatch():
    with pytest.raises(
        RuntimeError,
        match=r"^Given groups=1, weight of size \[4, 3, 3, 3\], expected input\[2, 5, 8, 8\] to "
        r"have 3 channels, but got 5 channels instead$",
    ):
        F.conv2d(r(2, 5, 8, 8), r(4, 3, 3, 3))
    with pytest.raises(
        RuntimeError, match=r"Given groups=2, expected weight to be divisible by 2 at dimension 0"
    ):
        F.conv2d(r(1, 4, 5, 5), r(3, 2, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match=r"expected bias to be 1-dimensional with 4 elements"):
        F.conv2d(r(1, 3, 5, 5), r(4, 3, 3, 3), r(3))
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input"):
        F.conv2d(r(5, 5), r(4, 3, 3, 3))
    with pytest.raises(
        RuntimeError,
        match=r"^Expected 4-dimensional input for 4-dimensional weight \[4, 3, 3, 3\], but got "
        r"3-dimensional input of size \[1, 3, 5\] instead$",
    ):
        F.conv1d(r(1, 3, 5), r(4, 3, 3, 3))


def test_conv_kernel_larger_than_input_and_bad_padding_strings():
    with pytest.raises(RuntimeError, match=r"Kernel size can't be greater than actual input size"):
        F.conv2d(r(1, 1, 2, 2), r(1, 1, 3, 3))
    # torch 2.15 raises these from C++ (RuntimeError, and a colon after "string")
    with pytest.raises(RuntimeError, match=r"padding='same' is not supported for strided"):
        F.conv2d(r(1, 1, 5, 5), r(1, 1, 3, 3), stride=2, padding="same")
    with pytest.raises(RuntimeError, match=r"Invalid padding string: 'full'"):
        F.conv1d(r(1, 1, 5), r(1, 1, 3), padding="full")


def test_unfold_fold_primitive_errors():
    with pytest.raises(NotImplementedError, match=r"Only 3D or 4D input Tensors are supported"):
        F.unfold(r(2, 3), 2)
    with pytest.raises(RuntimeError, match=r"stride should be greater than zero"):
        F.unfold(r(1, 1, 4, 4), 2, stride=0)
    with pytest.raises(RuntimeError, match=r"larger than the padded input"):
        F.unfold(r(1, 1, 2, 2), 3)
    with pytest.raises(
        RuntimeError,
        match=r"^Given output_size=\(4, 4\), kernel_size=\(2, 2\), dilation=\(1, 1\), "
        r"padding=\(0, 0\), stride=\(1, 1\), expected size of input's dimension 2 to match "
        r"the calculated number of sliding blocks 3 \* 3 = 9, but got input\.size\(2\)=5\.$",
    ):
        F.fold(r(1, 4, 5), (4, 4), 2)
    with pytest.raises(RuntimeError, match=r"divisible by the product of kernel_size"):
        F.fold(r(1, 5, 9), (4, 4), 2)
    with pytest.raises(RuntimeError, match=r"kernel size should be greater than zero"):
        fg._C._nn_im2col(r(1, 1, 4, 4), [-1, 2], [1, 1], [0, 0], [1, 1])
    with pytest.raises(RuntimeError, match=r"\"gather_padded\" not implemented for 'Long'"):
        F.unfold(fg.ones(1, 1, 3, 3, dtype=fg.int64), 2)


def test_pool_errors():
    with pytest.raises(RuntimeError, match=r"pad should be at most half of effective kernel size"):
        F.max_pool2d(r(1, 1, 5, 5), 2, padding=2)
    with pytest.raises(
        RuntimeError, match=r"^non-empty 3D or 4D \(batch mode\) tensor expected for input$"
    ):
        F.max_pool2d(r(5, 5), 2)
    with pytest.raises(RuntimeError, match=r"^stride should not be zero$"):
        F.avg_pool2d(r(1, 1, 5, 5), 2, stride=0)
    with pytest.raises(
        RuntimeError,
        match=r"^Given input size: \(1x2x2\)\. Calculated output size: \(1x0x0\)\. Output "
        r"size is too small$",
    ):
        F.avg_pool2d(r(1, 1, 2, 2), 3)
    with pytest.raises(RuntimeError, match=r"divisor must be not zero"):
        F.avg_pool2d(r(1, 1, 4, 4), 2, divisor_override=0)


def test_pad_errors():
    with pytest.raises(RuntimeError, match=r"^Padding length must be divisible by 2$"):
        F.pad(r(2, 3), (1,))
    with pytest.raises(
        RuntimeError,
        match=r"Padding length should be less than or equal to two times the input dimension "
        r"but got padding length 6 and input of dimension 2",
    ):
        F.pad(r(2, 3), (1, 1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError, match=r"Padding size should be less than the corresponding"):
        F.pad(r(1, 2, 3), (3, 0), mode="reflect")
    with pytest.raises(NotImplementedError, match=r"Unrecognised padding mode wrap"):
        F.pad(r(2, 3), (1, 1), mode="wrap")
    with pytest.raises(RuntimeError, match=r"resulted in a negative output size"):
        F.pad(r(2, 3), (-2, -2))


def test_loss_errors():
    with pytest.raises(ValueError, match=r"^avg is not a valid value for reduction$"):
        F.mse_loss(r(3), r(3), reduction="avg")
    with pytest.warns(UserWarning, match=r"Using a target size \(\[1\]\) that is different"):
        F.mse_loss(r(3), r(1))
    with pytest.raises(RuntimeError, match=r"smooth_l1_loss does not support negative values"):
        F.smooth_l1_loss(r(3), r(3), beta=-1.0)
    with pytest.raises(RuntimeError, match=r"huber_loss does not support non-positive values"):
        F.huber_loss(r(3), r(3), delta=0.0)
    with pytest.raises(
        ValueError, match=r"^Expected input batch_size \(3\) to match target batch_size \(2\)\.$"
    ):
        F.cross_entropy(r(3, 4), idx(0, 1))
    with pytest.raises(IndexError, match=r"^Target 4 is out of bounds\.$"):
        F.nll_loss(r(2, 4), idx(0, 4))
    with pytest.raises(IndexError, match=r"^Target -1 is out of bounds\.$"):
        F.cross_entropy(r(2, 4), idx(-1, 0))
    with pytest.raises(
        RuntimeError, match=r"^expected target dtype to be Long or Byte, but got Double$"
    ):
        F.nll_loss(r(2, 4), r(2))
    with pytest.raises(RuntimeError, match=r"weight tensor should be defined either for all 4"):
        F.cross_entropy(r(2, 4), idx(0, 1), weight=r(3))
    with pytest.raises(RuntimeError, match=r"label_smoothing must be between 0\.0 and 1\.0"):
        F.cross_entropy(r(2, 4), idx(0, 1), label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"Target size \(\[2\]\) must be the same as input size"):
        F.binary_cross_entropy_with_logits(r(3), r(2))
    with pytest.raises(RuntimeError, match=r"^all elements of input should be between 0 and 1$"):
        F.binary_cross_entropy(fg.tensor([0.5, 1.5]), fg.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"is deprecated. Please ensure they have the same size"):
        F.binary_cross_entropy(fg.tensor([0.5, 0.5]), fg.tensor([1.0]))
    with pytest.warns(UserWarning, match=r"^reduction: 'mean' divides the total loss by both"):
        F.kl_div(r(2, 3), r(2, 3).abs())
    with pytest.raises(ValueError, match=r"^avg is not a valid value for reduction$"):
        F.kl_div(r(2, 3), r(2, 3).abs(), reduction="avg")
    with pytest.warns(UserWarning, match=r"size_average and reduce args will be deprecated"):
        F.l1_loss(r(3), r(3), size_average=False)


def test_activation_and_misc_errors():
    with pytest.raises(RuntimeError, match=r"^approximate argument must be either none or tanh\.$"):
        F.gelu(r(3), approximate="fast")
    with pytest.raises(ValueError, match=r"^dropout probability has to be between 0 and 1, but"):
        F.dropout(r(3), p=1.5)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of"):
        F.softmax(r(2, 3), dim=2)
    with pytest.warns(UserWarning, match=r"^Implicit dimension choice for softmax has been"):
        F.softmax(r(2, 3))
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3\], expected input with "):
        F.layer_norm(r(2, 4), [3])
    with pytest.raises(RuntimeError, match=r"^one_hot is only applicable to index tensor"):
        F.one_hot(r(3))
    with pytest.raises(RuntimeError, match=r"^Class values must be smaller than num_classes\.$"):
        F.one_hot(idx(0, 3), 3)
    with pytest.raises(RuntimeError, match=r"^Class values must be non-negative\.$"):
        F.one_hot(idx(0, -1), 3)
    with pytest.raises(RuntimeError, match=r"Expected tensor for argument #1 'indices' to have"):
        F.embedding(r(2), r(4, 3))
    with pytest.raises(IndexError, match=r"^index out of range in self$"):
        F.embedding(idx(0, 4), r(4, 3))
    with pytest.raises(AssertionError, match=r"Padding_idx must be within num_embeddings"):
        F.embedding(idx(0, 1), r(4, 3), padding_idx=4)
    with pytest.raises(ValueError, match=r"min_val cannot be greater than max_val"):
        F.hardtanh(r(3), 1.0, -1.0)
