"""``ferrograd.optim``: torch.optim's optimizers, with the updates computed in Rust."""

from . import lr_scheduler, swa_utils
from ._optimizers import (
    ASGD,
    SGD,
    Adafactor,
    Adagrad,
    Adam,
    Adamax,
    AdamW,
    NAdam,
    RAdam,
    RMSprop,
    Rprop,
)
from .lbfgs import LBFGS
from .optimizer import Optimizer

__all__ = [
    "ASGD",
    "LBFGS",
    "SGD",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "lr_scheduler",
    "swa_utils",
]
