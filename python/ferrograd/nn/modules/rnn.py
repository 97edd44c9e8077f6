"""Recurrent layers with torch's parameters, initialisation, checks and reprs: ``RNN``, ``LSTM``,
``GRU`` (multi-layer, bidirectional, ``batch_first``, inter-layer dropout, LSTM projections) and
the cells ``RNNCell``, ``LSTMCell``, ``GRUCell``. The recurrences run in the crate
(``ferrograd._C._nn_rnn`` and the ``_nn_*_cell`` functions)."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, List, Optional, Tuple

from ... import _C
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _packed_rows, _unpack_sorted
from .linear import _empty
from .module import Module

Tensor = _C.Tensor

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _zeros(*shape: int, like: Tensor) -> Tensor:
    from ..._creation import zeros

    return zeros(*shape, dtype=like.dtype)


def _check_type(name: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{name} should be of type {kind.__name__}, got: {type(value).__name__}")


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: the per-layer, per-direction weights named as
    torch names them (``weight_ih_l0``, ``bias_hh_l1_reverse``, ``weight_hr_l0``), their
    U(-1/sqrt(hidden), 1/sqrt(hidden)) initialisation and the input checks."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if (
            not isinstance(dropout, numbers.Number)
            or isinstance(dropout, bool)
            or not 0 <= dropout <= 1  # type: ignore[operator]
        ):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an "
                "element being zeroed"
            )
        if dropout > 0 and num_layers == 1:  # type: ignore[operator]
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                "dropout expects num_layers greater than 1, but got "
                f"dropout={dropout} and num_layers={num_layers}",
                stacklevel=2,
            )
        _check_type("bias", bias, bool)
        _check_type("batch_first", batch_first, bool)
        _check_type("input_size", input_size, int)
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        _check_type("hidden_size", hidden_size, int)
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: List[str] = []
        self._all_weights: List[List[str]] = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [
                    ("weight_ih", (gate_size, layer_input)),
                    ("weight_hh", (gate_size, real_hidden)),
                ]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for stem, shape in shapes:
                    name = f"{stem}_l{layer}{suffix}"
                    setattr(self, name, Parameter(_empty(*shape, dtype=dtype, device=device)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> List[Tensor]:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> List[List[Parameter]]:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op: the weights are used where they are (torch compacts them for cuDNN)."""

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def check_input(self, input: Tensor, batch_sizes: Optional[Tensor]) -> None:
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). "
                f"Convert input: input.to({w.dtype}), or convert model: model.to({input.dtype})"
            )
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                "input.size(-1) must be equal to input_size. "
                f"Expected {self.input_size}, got {input.size(-1)}"
            )

    def _mini_batch(self, input: Tensor, batch_sizes: Optional[Tensor]) -> int:
        if batch_sizes is not None:
            return int(batch_sizes[0])
        return int(input.size(0) if self.batch_first else input.size(1))

    def get_expected_hidden_size(
        self, input: Tensor, batch_sizes: Optional[Tensor]
    ) -> Tuple[int, int, int]:
        batch = self._mini_batch(input, batch_sizes)
        directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * directions, batch, size)

    def check_hidden_size(
        self,
        hx: Tensor,
        expected_hidden_size: Tuple[int, int, int],
        msg: str = "Expected hidden size {}, got {}",
    ) -> None:
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(
        self, input: Tensor, hidden: Tensor, batch_sizes: Optional[Tensor]
    ) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    def _run(
        self,
        input: Tensor,
        hx: Tensor,
        cx: Optional[Tensor],
        lengths: Optional[List[int]] = None,
    ) -> Tuple[Any, ...]:
        return _C._nn_rnn(
            self.mode,
            input,
            hx,
            cx,
            self._flat_weights,
            self.bias,
            self.proj_size > 0,
            self.num_layers,
            self.dropout,
            self.training,
            self.bidirectional,
            self.batch_first and lengths is None,
            lengths,
        )

    def _run_packed(
        self, input: PackedSequence, hx: Optional[Tensor], cx: Optional[Tensor]
    ) -> Tuple[PackedSequence, Tensor, Optional[Tensor]]:
        """A packed batch runs padded, in its sorted order, with each row's length; the output
        is packed again and the final states put back in the caller's order."""
        data, batch_sizes = input.data, input.batch_sizes
        padded, lengths = _unpack_sorted(input, 0.0, batch_sizes.size(0))
        states = [hx, cx]
        for i, (s, expected) in enumerate(
            [
                (hx, self.get_expected_hidden_size(data, batch_sizes)),
                (cx, self._cell_size(data, batch_sizes)),
            ]
        ):
            if expected is None:
                continue
            if s is None:
                states[i] = _zeros(*expected, like=data)
            elif input.sorted_indices is not None:
                states[i] = s.index_select(1, input.sorted_indices)
        if self.mode == "LSTM":
            self.check_forward_args(data, (states[0], states[1]), batch_sizes)  # type: ignore[arg-type]
        else:
            self.check_forward_args(data, states[0], batch_sizes)  # type: ignore[arg-type]
        output, h_n, c_n = self._run(padded, states[0], states[1], lengths)  # type: ignore[arg-type]
        steps, batch = output.size(0), output.size(1)
        rows = _packed_rows([int(v) for v in batch_sizes.tolist()], batch)
        flat = output.reshape(steps * batch, output.size(2))
        out = input._replace(data=flat.index_select(0, _index(rows)))
        if input.unsorted_indices is not None:
            h_n = h_n.index_select(1, input.unsorted_indices)
            if c_n is not None:
                c_n = c_n.index_select(1, input.unsorted_indices)
        return out, h_n, c_n

    def _cell_size(
        self, input: Tensor, batch_sizes: Optional[Tensor]
    ) -> Optional[Tuple[int, int, int]]:
        return None

    def _batched(
        self, input: Tensor, hx: Optional[Tensor], name: str
    ) -> Tuple[Tensor, Optional[Tensor], bool]:
        """Adds the batch dim to an unbatched input and its state (torch's checks)."""
        _reject_packed(input)
        if input.dim() not in (2, 3):
            kind = " tensor" if name == "RNN" else ""
            raise ValueError(
                f"{name}: Expected input to be 2D or 3D, got {input.dim()}D{kind} instead"
            )
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            if hx is not None:
                if hx.dim() != 2:
                    raise RuntimeError(
                        "For unbatched 2-D input, hx should also be 2-D but got "
                        f"{hx.dim()}-D tensor"
                    )
                hx = hx.unsqueeze(1)
        elif hx is not None and hx.dim() != 3:
            raise RuntimeError(
                f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor"
            )
        return input, hx, batched

    def _single_state(self, name: str, input: Any, hx: Optional[Tensor]) -> Tuple[Any, Tensor]:
        if isinstance(input, PackedSequence):
            out, h_n, _ = self._run_packed(input, hx, None)
            return out, h_n
        input, hx, batched = self._batched(input, hx, name)
        if hx is None:
            hx = _zeros(*self.get_expected_hidden_size(input, None), like=input)
        self.check_forward_args(input, hx, None)
        output, h_n, _ = self._run(input, hx, None)
        if not batched:
            output = output.squeeze(0 if self.batch_first else 1)
            h_n = h_n.squeeze(1)
        return output, h_n


def _reject_packed(input: Any) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(
            f"recurrent layers take a Tensor or a PackedSequence, got {type(input).__name__}"
        )


def _index(rows: List[int]) -> Tensor:
    from ..._creation import tensor

    return tensor(rows, dtype=_C.int64)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(
                f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        super().__init__(mode, *args, **kwargs)

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        return self._single_state("RNN", input, hx)


class GRU(RNNBase):
    """Gated recurrent unit, gates ``r, z, n`` in torch's order and formula."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        return self._single_state("GRU", input, hx)


class LSTM(RNNBase):
    """Long short-term memory, gates ``i, f, g, o``; ``proj_size > 0`` projects ``h``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(
        self, input: Tensor, batch_sizes: Optional[Tensor]
    ) -> Tuple[int, int, int]:
        batch = self._mini_batch(input, batch_sizes)
        directions = 2 if self.bidirectional else 1
        return (self.num_layers * directions, batch, self.hidden_size)

    def _cell_size(
        self, input: Tensor, batch_sizes: Optional[Tensor]
    ) -> Optional[Tuple[int, int, int]]:
        return self.get_expected_cell_size(input, batch_sizes)

    def check_forward_args(  # type: ignore[override]
        self, input: Tensor, hidden: Tuple[Tensor, Tensor], batch_sizes: Optional[Tensor]
    ) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(
            hidden[0],
            self.get_expected_hidden_size(input, batch_sizes),
            "Expected hidden[0] size {}, got {}",
        )
        self.check_hidden_size(
            hidden[1],
            self.get_expected_cell_size(input, batch_sizes),
            "Expected hidden[1] size {}, got {}",
        )

    def forward(  # type: ignore[override]
        self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None
    ) -> Tuple[Any, Tuple[Tensor, Tensor]]:
        if isinstance(input, PackedSequence):
            h0, c0 = hx if hx is not None else (None, None)
            out, h_n, c_n = self._run_packed(input, h0, c0)
            return out, (h_n, c_n)  # type: ignore[return-value]
        _reject_packed(input)
        if input.dim() not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
        if hx is None:
            hx = (
                _zeros(*self.get_expected_hidden_size(input, None), like=input),
                _zeros(*self.get_expected_cell_size(input, None), like=input),
            )
        else:
            h0, c0 = hx
            if batched and (h0.dim() != 3 or c0.dim() != 3):
                raise RuntimeError(
                    "For batched 3-D input, hx and cx should also be 3-D but got "
                    f"({h0.dim()}-D, {c0.dim()}-D) tensors"
                )
            if not batched:
                if h0.dim() != 2 or c0.dim() != 2:
                    raise RuntimeError(
                        "For unbatched 2-D input, hx and cx should also be 2-D but got "
                        f"({h0.dim()}-D, {c0.dim()}-D) tensors"
                    )
                hx = (h0.unsqueeze(1), c0.unsqueeze(1))
        self.check_forward_args(input, hx, None)
        output, h_n, c_n = self._run(input, hx[0], hx[1])
        if not batched:
            output = output.squeeze(0 if self.batch_first else 1)
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return output, (h_n, c_n)


class RNNCellBase(Module):
    """What the cells share: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        rows = num_chunks * hidden_size
        self.weight_ih = Parameter(_empty(rows, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(_empty(rows, hidden_size, dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(_empty(rows, dtype=dtype, device=device))
            self.bias_hh = Parameter(_empty(rows, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(
        self, name: str, input: Tensor, states: List[Optional[Tensor]], labels: List[str]
    ) -> Tuple[Tensor, List[Tensor], bool]:
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        for s, label in zip(states, labels):
            if s is not None and s.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {s.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        out = []
        for s in states:
            if s is None:
                s = _zeros(input.size(0), self.hidden_size, like=input)
            elif not batched:
                s = s.unsqueeze(0)
            out.append(s)
        return input, out, batched


class RNNCell(RNNCellBase):
    """One Elman RNN step, ``nonlinearity`` "tanh" or "relu"."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        input, (h,), batched = self._prepare("RNNCell", input, [hx], ["hidden"])
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        out = _C._nn_rnn_cell(
            input, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, self.nonlinearity
        )
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(
        self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None
    ) -> Tuple[Tensor, Tensor]:
        states: List[Optional[Tensor]] = [None, None] if hx is None else list(hx)
        input, (h, c), batched = self._prepare("LSTMCell", input, states, ["hx[0]", "hx[1]"])
        hy, cy = _C._nn_lstm_cell(
            input, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh
        )
        return (hy, cy) if batched else (hy.squeeze(0), cy.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        input, (h,), batched = self._prepare("GRUCell", input, [hx], ["hidden"])
        out = _C._nn_gru_cell(input, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return out if batched else out.squeeze(0)
