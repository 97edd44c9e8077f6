"""torch.optim's optimizers with torch's signatures, defaults, checks and state layout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import _C
from .._creation import full_like, zeros, zeros_like
from .optimizer import Optimizer, _params_with_grad


def _check_lr(lr: Any) -> None:
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _next_step(state: dict[str, Any]) -> float:
    step = float(state["step"]) + 1.0
    state["step"] = Optimizer._step_tensor(step)
    return step


def _check_non_negative(name: str, value: float) -> None:
    """torch's ``Invalid <name> value: <value>`` for a hyperparameter below zero (or NaN)."""
    if not 0.0 <= value:
        raise ValueError(f"Invalid {name} value: {value}")


def _check_betas(betas: tuple[float, float]) -> None:
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


def _group_by_step(
    optimizer: Optimizer, group: dict[str, Any], init: Callable[[Any, dict[str, Any]], None]
) -> dict[float, list[tuple[Any, Any]]]:
    """The group's parameters with a gradient, by their step number after this step (equal
    unless some had no grad on a step); ``init`` fills the state of a parameter seen first."""
    params, grads = _params_with_grad(group)
    by_step: dict[float, list[tuple[Any, Any]]] = {}
    for p, g in zip(params, grads):
        state = optimizer.state[p]
        if len(state) == 0:
            state["step"] = Optimizer._step_tensor(0.0)
            init(p, state)
        by_step.setdefault(_next_step(state), []).append((p, g))
    return by_step


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with momentum (torch.optim.SGD)."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            foreach=foreach,
            differentiable=differentiable,
            fused=fused,
        )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads = _params_with_grad(group)
            if not params:
                continue
            momentum = group["momentum"]
            args = (
                group["lr"],
                momentum,
                group["dampening"],
                group["nesterov"],
                group["weight_decay"],
                group["maximize"],
            )
            if momentum == 0:
                _C._sgd_step(params, grads, [], *args, False)
                continue
            # Parameters without a buffer get one equal to their gradient (torch's first step).
            old = [(p, g) for p, g in zip(params, grads) if "momentum_buffer" in self.state[p]]
            new = [(p, g) for p, g in zip(params, grads) if "momentum_buffer" not in self.state[p]]
            for p, _ in new:
                self.state[p]["momentum_buffer"] = zeros_like(p)
            for pairs, first in ((old, False), (new, True)):
                if pairs:
                    ps = [p for p, _ in pairs]
                    bufs = [self.state[p]["momentum_buffer"] for p in ps]
                    _C._sgd_step(ps, [g for _, g in pairs], bufs, *args, first)
        return loss


class Adam(Optimizer):
    """Adam (torch.optim.Adam); AdamW with ``decoupled_weight_decay=True``."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_non_negative("epsilon", eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        _check_non_negative("weight_decay", weight_decay)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads = _params_with_grad(group)
            amsgrad = group["amsgrad"]
            # Parameters are grouped by step count (equal unless some had no grad on a step).
            by_step: dict[float, list[tuple[Any, Any]]] = {}
            for p, g in zip(params, grads):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = Optimizer._step_tensor(0.0)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = zeros_like(p)
                by_step.setdefault(_next_step(state), []).append((p, g))
            beta1, beta2 = group["betas"]
            for step, pairs in by_step.items():
                ps = [p for p, _ in pairs]
                states = [self.state[p] for p in ps]
                _C._adam_step(
                    ps,
                    [g for _, g in pairs],
                    [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states],
                    [s["max_exp_avg_sq"] for s in states] if amsgrad else [],
                    step,
                    group["lr"],
                    beta1,
                    beta2,
                    group["eps"],
                    group["weight_decay"],
                    amsgrad,
                    group["maximize"],
                    group["decoupled_weight_decay"],
                )
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW)."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )


class RMSprop(Optimizer):
    """RMSprop (torch.optim.RMSprop)."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_non_negative("epsilon", eps)
        _check_non_negative("momentum", momentum)
        _check_non_negative("weight_decay", weight_decay)
        _check_non_negative("alpha", alpha)
        defaults = dict(
            lr=lr,
            momentum=momentum,
            alpha=alpha,
            eps=eps,
            centered=centered,
            weight_decay=weight_decay,
            capturable=capturable,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads = _params_with_grad(group)
            if not params:
                continue
            momentum, centered = group["momentum"], group["centered"]
            states = []
            for p in params:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = Optimizer._step_tensor(0.0)
                    state["square_avg"] = zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = zeros_like(p)
                    if centered:
                        state["grad_avg"] = zeros_like(p)
                _next_step(state)
                states.append(state)
            _C._rmsprop_step(
                params,
                grads,
                [s["square_avg"] for s in states],
                [s["momentum_buffer"] for s in states] if momentum > 0 else [],
                [s["grad_avg"] for s in states] if centered else [],
                group["lr"],
                group["alpha"],
                group["eps"],
                group["weight_decay"],
                momentum,
                centered,
                group["maximize"],
            )
        return loss


class Adagrad(Optimizer):
    """Adagrad (torch.optim.Adagrad); state is created at construction, as torch's."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_lr(lr)
        _check_non_negative("lr_decay", lr_decay)
        _check_non_negative("weight_decay", weight_decay)
        _check_non_negative("initial_accumulator_value", initial_accumulator_value)
        _check_non_negative("epsilon", eps)
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = Optimizer._step_tensor(0.0)
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads = _params_with_grad(group)
            by_step: dict[float, list[tuple[Any, Any]]] = {}
            for p, g in zip(params, grads):
                by_step.setdefault(_next_step(self.state[p]), []).append((p, g))
            for step, pairs in by_step.items():
                ps = [p for p, _ in pairs]
                _C._adagrad_step(
                    ps,
                    [g for _, g in pairs],
                    [self.state[p]["sum"] for p in ps],
                    step,
                    group["lr"],
                    group["lr_decay"],
                    group["weight_decay"],
                    group["eps"],
                    group["maximize"],
                )
        return loss


def _init_moments(p: Any, state: dict[str, Any]) -> None:
    state["exp_avg"] = zeros_like(p)
    state["exp_avg_sq"] = zeros_like(p)


class NAdam(Optimizer):
    """NAdam (torch.optim.NAdam), with NAdamW's ``decoupled_weight_decay``."""

    def __init__(
        self,
        params: Any,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_non_negative("epsilon", eps)
        _check_betas(betas)
        _check_non_negative("weight_decay", weight_decay)
        _check_non_negative("momentum_decay", momentum_decay)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)

        def init(p: Any, state: dict[str, Any]) -> None:
            state["mu_product"] = Optimizer._step_tensor(1.0)
            _init_moments(p, state)

        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for step, pairs in _group_by_step(self, group, init).items():
                ps = [p for p, _ in pairs]
                states = [self.state[p] for p in ps]
                _C._nadam_step(
                    ps,
                    [g for _, g in pairs],
                    [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states],
                    [s["mu_product"] for s in states],
                    step,
                    group["lr"],
                    beta1,
                    beta2,
                    group["eps"],
                    group["weight_decay"],
                    group["momentum_decay"],
                    group["decoupled_weight_decay"],
                    group["maximize"],
                )
        return loss


class RAdam(Optimizer):
    """RAdam (torch.optim.RAdam), with RAdamW's ``decoupled_weight_decay``."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_non_negative("epsilon", eps)
        _check_betas(betas)
        _check_non_negative("weight_decay", weight_decay)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            decoupled_weight_decay=decoupled_weight_decay,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for step, pairs in _group_by_step(self, group, _init_moments).items():
                ps = [p for p, _ in pairs]
                states = [self.state[p] for p in ps]
                _C._radam_step(
                    ps,
                    [g for _, g in pairs],
                    [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states],
                    step,
                    group["lr"],
                    beta1,
                    beta2,
                    group["eps"],
                    group["weight_decay"],
                    group["decoupled_weight_decay"],
                    group["maximize"],
                )
        return loss


class Adamax(Optimizer):
    """Adamax, Adam with the infinity norm (torch.optim.Adamax)."""

    def __init__(
        self,
        params: Any,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_non_negative("epsilon", eps)
        _check_betas(betas)
        _check_non_negative("weight_decay", weight_decay)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)

        def init(p: Any, state: dict[str, Any]) -> None:
            state["exp_avg"] = zeros_like(p)
            state["exp_inf"] = zeros_like(p)

        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for step, pairs in _group_by_step(self, group, init).items():
                ps = [p for p, _ in pairs]
                states = [self.state[p] for p in ps]
                _C._adamax_step(
                    ps,
                    [g for _, g in pairs],
                    [s["exp_avg"] for s in states],
                    [s["exp_inf"] for s in states],
                    step,
                    group["lr"],
                    beta1,
                    beta2,
                    group["eps"],
                    group["weight_decay"],
                    group["maximize"],
                )
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation (torch.optim.Rprop)."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(
            lr=lr,
            etas=etas,
            step_sizes=step_sizes,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads = _params_with_grad(group)
            if not params:
                continue
            states = []
            for p in params:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = Optimizer._step_tensor(0.0)
                    state["prev"] = zeros_like(p)
                    state["step_size"] = full_like(p, group["lr"])
                _next_step(state)
                states.append(state)
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            _C._rprop_step(
                params,
                grads,
                [s["prev"] for s in states],
                [s["step_size"] for s in states],
                etaminus,
                etaplus,
                step_size_min,
                step_size_max,
                group["maximize"],
            )
        return loss


class ASGD(Optimizer):
    """Averaged stochastic gradient descent (torch.optim.ASGD); the average is ``state['ax']``."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_non_negative("lambd", lambd)
        _check_non_negative("alpha", alpha)
        _check_non_negative("weight_decay", weight_decay)
        defaults = dict(
            lr=lr,
            lambd=lambd,
            alpha=alpha,
            t0=t0,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:

            def init(p: Any, state: dict[str, Any], lr: float = group["lr"]) -> None:
                state["eta"] = Optimizer._step_tensor(lr)
                state["mu"] = Optimizer._step_tensor(1.0)
                state["ax"] = zeros_like(p)

            for step, pairs in _group_by_step(self, group, init).items():
                ps = [p for p, _ in pairs]
                states = [self.state[p] for p in ps]
                _C._asgd_step(
                    ps,
                    [g for _, g in pairs],
                    [s["ax"] for s in states],
                    [s["eta"] for s in states],
                    [s["mu"] for s in states],
                    step,
                    group["lr"],
                    group["lambd"],
                    group["alpha"],
                    group["t0"],
                    group["weight_decay"],
                    group["maximize"],
                )
        return loss


class Adafactor(Optimizer):
    """Adafactor (torch.optim.Adafactor): factored second moments for parameters of two or more
    dimensions (``state['row_var']``, ``state['col_var']``), ``state['variance']`` otherwise."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(
            lr=lr,
            beta2_decay=beta2_decay,
            eps=eps,
            d=d,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step."""
        loss = self._closure_loss(closure)

        def init(p: Any, state: dict[str, Any]) -> None:
            if p.dim() > 1:
                shape = list(p.shape)
                state["row_var"] = zeros(*shape[:-1], 1, dtype=p.dtype)
                state["col_var"] = zeros(*shape[:-2], 1, shape[-1], dtype=p.dtype)
            else:
                state["variance"] = zeros_like(p)

        for group in self.param_groups:
            eps1, eps2 = group["eps"]
            for step, pairs in _group_by_step(self, group, init).items():
                ps = [p for p, _ in pairs]
                states = [self.state[p] for p in ps]
                _C._adafactor_step(
                    ps,
                    [g for _, g in pairs],
                    [s["row_var"] for s in states if "row_var" in s],
                    [s["col_var"] for s in states if "col_var" in s],
                    [s["variance"] for s in states if "variance" in s],
                    step,
                    group["lr"],
                    group["beta2_decay"],
                    eps1,
                    eps2,
                    group["d"],
                    group["weight_decay"],
                    group["maximize"],
                )
        return loss
