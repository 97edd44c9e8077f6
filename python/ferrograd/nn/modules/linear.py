"""``Identity`` and ``Linear`` with torch's default initialisation."""

from __future__ import annotations

import math
from typing import Any

from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

Tensor = _C.Tensor

__all__ = ["Bilinear", "Identity", "Linear"]


def _empty(*shape: int, dtype: Any = None, device: Any = None) -> Tensor:
    """Storage for a new parameter; only the CPU exists (``None``, ``"cpu"``, ``"cpu:0"``)."""
    from ..._creation import empty

    if device is not None and not str(device).startswith("cpu"):
        raise RuntimeError(f"ferrograd supports only the CPU device, not {device!r}")
    return empty(*shape, dtype=dtype, device=device)


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments, as torch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x W^T + b``; W ~ kaiming_uniform_(a=sqrt(5)), b ~ U(-1/sqrt(in), 1/sqrt(in))."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(_empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Bilinear(Module):
    """``y = x1^T A x2 + b`` (an einsum, as ferrograd has no fused op); A and b ~
    U(-1/sqrt(in1_features), 1/sqrt(in1_features)) as torch."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(
            _empty(out_features, in1_features, in2_features, dtype=dtype, device=device)
        )
        if bias:
            self.bias = Parameter(_empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        from ... import _ops_shape

        out = _ops_shape.einsum("...i,oij,...j->...o", input1, self.weight, input2)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
