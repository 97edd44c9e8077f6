"""``ferrograd.optim``: torch.optim's optimizers, with the updates computed in Rust."""

from . import lr_scheduler, swa_utils
from ._optimizers import SGD, Adagrad, Adam, AdamW, RMSprop
from .lbfgs import LBFGS
from .optimizer import Optimizer

__all__ = [
    "LBFGS",
    "SGD",
    "Adagrad",
    "Adam",
    "AdamW",
    "Optimizer",
    "RMSprop",
    "lr_scheduler",
    "swa_utils",
]
