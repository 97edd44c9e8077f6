"""Neural-network building blocks: ``Parameter``, ``Module`` and layers, ``nn.functional``
(``import ferrograd.nn.functional as F``), ``nn.init`` and ``nn.utils``."""

from __future__ import annotations

from . import functional, init, parallel, utils
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parameter import Parameter

__all__ = ["Parameter", "functional", "init", "parallel", "utils", *_modules_all]
