"""``torch.optim.swa_utils``: weight averaging (SWA's running mean, or an exponential moving
average) of a model's parameters in a copy of it, the SWA learning-rate schedule, and
recomputing batch-norm statistics for the averaged weights. The averages are tensor ops
(``lerp``, in the crate) on the copy's parameters in place."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any, List, Optional, Union

from .. import _C
from .._creation import tensor
from .._dtypes import int64
from ..autograd.grad_mode import no_grad
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler, _per_group
from .optimizer import Optimizer

__all__ = [
    "AveragedModel",
    "SWALR",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]

Tensor = _C.Tensor


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[[List[Any], List[Any], Any], None]:
    """An update of every averaged parameter at once: ``ema += (1 - decay) (p - ema)``."""

    @no_grad()
    def ema_update(ema_params: List[Any], params: List[Any], _: Any) -> None:
        if ema_params and ema_params[0].is_floating_point():
            for e, p in zip(ema_params, params):
                e.lerp_(p, 1 - decay)
        else:
            for e, p in zip(ema_params, params):
                e.copy_(e * decay + p * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[[List[Any], List[Any], Any], None]:
    """An update of every averaged parameter at once: the running mean over the models seen
    (``avg += (p - avg) / (n + 1)``)."""

    @no_grad()
    def swa_update(avg_params: List[Any], params: List[Any], num_averaged: Any) -> None:
        n = float(num_averaged)
        if avg_params and avg_params[0].is_floating_point():
            for a, p in zip(avg_params, params):
                a.lerp_(p, 1 / (n + 1))
        else:
            for a, p in zip(avg_params, params):
                a.add_(p - a, alpha=1.0 / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Any, Any, Any], Any]:
    """One parameter's exponential moving average: ``decay * ema + (1 - decay) * p``."""

    @no_grad()
    def ema_update(ema_param: Any, current_param: Any, num_averaged: Any) -> Any:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable[[Any, Any, Any], Any]:
    """One parameter's running mean: ``avg + (p - avg) / (n + 1)``."""

    @no_grad()
    def swa_update(averaged_param: Any, current_param: Any, num_averaged: Any) -> Any:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and, with ``use_buffers``, buffers) are averaged
    over the models passed to :meth:`update_parameters`: SWA's running mean by default,
    ``avg_fn`` one tensor at a time or ``multi_avg_fn`` all at once (EMA with
    :func:`get_ema_multi_avg_fn`)."""

    def __init__(
        self,
        model: Module,
        device: Any = None,
        avg_fn: Optional[Callable[[Any, Any, Any], Any]] = None,
        multi_avg_fn: Optional[Callable[[List[Any], List[Any], Any], None]] = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters into the average (the first call copies them)."""
        if self.use_buffers:
            mine: Iterable[Any] = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs: Iterable[Any] = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        avg, cur = [], []
        first = int(self.n_averaged) == 0
        with no_grad():
            for a, p in zip(mine, theirs):
                a, p = a.detach(), p.detach()
                avg.append(a)
                cur.append(p)
                if first:
                    a.copy_(p)
            if not first:
                if self.avg_fn is None:
                    fn = self.multi_avg_fn or get_swa_multi_avg_fn()
                    # One call per dtype, as torch groups its foreach updates.
                    for dtype in dict.fromkeys(a.dtype for a in avg):
                        pairs = [(a, p) for a, p in zip(avg, cur) if a.dtype == dtype]
                        fn([a for a, _ in pairs], [p for _, p in pairs], self.n_averaged)
                else:
                    for a, p in zip(avg, cur):
                        a.copy_(self.avg_fn(a, p, self.n_averaged))
            if not self.use_buffers:
                # Buffers follow the source model (batch-norm statistics are recomputed
                # for the averaged weights by update_bn).
                for b_avg, b in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b.detach())
            self.n_averaged += 1


@no_grad()
def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the running statistics of ``model``'s batch norms over one pass of
    ``loader`` (batches, or tuples/lists whose first item is the input), as a cumulative
    average."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to ``swa_lr`` over ``anneal_epochs`` (cosine or linear), then
    hold it."""

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: Union[float, List[float]],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        for lr, group in zip(
            _per_group("swa_lr", swa_lr, optimizer.param_groups), optimizer.param_groups
        ):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> List[float]:
        """The lr ``alpha`` of the way from where the schedule started to ``swa_lr``."""
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def state_dict(self) -> dict:
        """Everything but the optimizer and the anneal function (chosen again on load)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}
