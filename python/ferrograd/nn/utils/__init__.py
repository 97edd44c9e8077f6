"""``nn.utils``: gradient clipping and flat parameter vectors."""

from __future__ import annotations

from . import rnn, stateless
from .clip_grad import clip_grad_norm_, clip_grad_value_
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = [
    "rnn",
    "stateless",
    "clip_grad_norm_",
    "clip_grad_value_",
    "parameters_to_vector",
    "vector_to_parameters",
]
