"""``Conv1d``/``Conv2d`` with torch's default initialisation, and 2-D pooling."""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from ... import _C
from .. import functional as F
from ..parameter import Parameter
from .linear import _empty, reset_weight_and_bias
from .module import Module

Tensor = _C.Tensor

__all__ = ["Conv1d", "Conv2d", "MaxPool2d", "AvgPool2d"]

_Size = Union[int, Tuple[int, ...]]


def _ntuple(v: Any, n: int) -> Tuple[int, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _nd = 0

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: _Size,
        stride: _Size = 1,
        padding: Union[str, _Size] = 0,
        dilation: _Size = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise NotImplementedError("only padding_mode='zeros' is supported")
        n = self._nd
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = False
        self.output_padding = (0,) * n
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(
            _empty(
                out_channels, in_channels // groups, *self.kernel_size, dtype=dtype, device=device
            )
        )
        if bias:
            self.bias = Parameter(_empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_weight_and_bias(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        return s.format(**self.__dict__)


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, C, L)``."""

    _nd = 1

    def forward(self, input: Tensor) -> Tensor:
        return F.conv1d(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class Conv2d(_ConvNd):
    """2-D convolution over ``(N, C, H, W)``."""

    _nd = 2

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class MaxPool2d(Module):
    """2-D max pooling (stride defaults to the kernel size)."""

    def __init__(
        self,
        kernel_size: _Size,
        stride: Optional[_Size] = None,
        padding: _Size = 0,
        dilation: _Size = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Any:
        return F.max_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(Module):
    """2-D average pooling (stride defaults to the kernel size)."""

    def __init__(
        self,
        kernel_size: _Size,
        stride: Optional[_Size] = None,
        padding: _Size = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: Optional[int] = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
