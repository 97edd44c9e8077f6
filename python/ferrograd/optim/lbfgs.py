"""L-BFGS (torch.optim.LBFGS): a quasi-Newton method driven by a closure that re-evaluates the
loss. All parameters are treated as one flat vector; the inverse-Hessian product comes from the
two-loop recursion over the last ``history_size`` curvature pairs, and the step from a fixed
length or a strong-Wolfe line search. The vector arithmetic runs on tensor ops (in the crate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, List, Optional, Tuple

from .._creation import zeros
from .._ops_shape import cat
from ..autograd.grad_mode import enable_grad, no_grad
from .optimizer import Optimizer


def _cubic_minimizer(
    x1: float, f1: float, g1: float, x2: float, f2: float, g2: float, bounds: Tuple[float, float]
) -> float:
    """The minimiser on ``bounds`` of the cubic through (x1, f1, g1) and (x2, f2, g2), or the
    middle of ``bounds`` when the cubic has no real minimiser there."""
    lo, hi = bounds
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc >= 0:
        d2 = disc**0.5 if x1 <= x2 else -(disc**0.5)
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        return min(max(x, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(
    evaluate: Callable[[float], Tuple[float, Any]],
    t: float,
    d: Any,
    f: float,
    g: Any,
    gtd: float,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> Tuple[float, Any, float, int]:
    """A step length along ``d`` meeting the strong Wolfe conditions (sufficient decrease
    ``c1``, curvature ``c2``): bracketing, then zooming by cubic interpolation (Nocedal and
    Wright, algorithms 3.5 and 3.6). Returns the loss and flat gradient there, the step and
    the number of evaluations."""
    d_norm = float(d.abs().max())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    bracket: List[float] = []
    bracket_f: List[float] = []
    bracket_g: List[Any] = []
    bracket_gtd: List[float] = []
    it = 0
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        # Extrapolate: between 1.01 t and 10 t, by the cubic through the last two points.
        lo, hi = t + 0.01 * (t - t_prev), t * 10
        t_next = _cubic_minimizer(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, (lo, hi))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.clone(), gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
    if it == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]

    # Zoom: shrink the bracket until a point meets both conditions.
    insufficient = False
    if len(bracket) == 1:
        low = high = 0
    else:
        low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        a, b = bracket
        t = _cubic_minimizer(
            a, bracket_f[0], bracket_gtd[0], b, bracket_f[1], bracket_gtd[1], (min(a, b), max(a, b))
        )
        # A point too near an end makes no progress: move it inside by a tenth of the width.
        width = max(a, b) - min(a, b)
        eps = 0.1 * width
        if min(max(a, b) - t, t - min(a, b)) < eps:
            if insufficient or t >= max(a, b) or t <= min(a, b):
                t = max(a, b) - eps if abs(t - max(a, b)) < abs(t - min(a, b)) else min(a, b) + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.clone(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.clone(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS (torch.optim.LBFGS). ``step`` needs a closure that clears the gradients,
    computes the loss, calls ``backward`` and returns the loss; it may be called several
    times per step. One parameter group only."""

    def __init__(
        self,
        params: Any,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: Optional[int] = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: Optional[str] = None,
    ) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
            line_search_fn=line_search_fn,
        )
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> Any:
        parts = [
            zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1)
            for p in self._params
        ]
        return cat(parts, 0)

    def _add_to_params(self, step: float, direction: Any) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset : offset + n].view_as(p), alpha=step)
            offset += n

    def _evaluate(
        self, closure: Callable[[], Any], x: List[Any], t: float, d: Any
    ) -> Tuple[float, Any]:
        """The loss and flat gradient at ``x + t d``, the parameters put back to ``x``."""
        self._add_to_params(t, d)
        with enable_grad():
            loss = float(closure())
        grad = self._flat_grad()
        for p, v in zip(self._params, x):
            p.copy_(v)
        return loss, grad

    @no_grad()
    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Perform a single optimization step: up to ``max_iter`` iterations."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure that re-evaluates the model")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search_fn = group["history_size"], group["line_search_fn"]
        if line_search_fn is not None and line_search_fn != "strong_wolfe":
            raise RuntimeError("only 'strong_wolfe' is supported")

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(flat_grad.abs().max()) <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1
            else:
                # The newest curvature pair (y, s), kept only when it is positive.
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                # Two-loop recursion: d = -H g.
                al = [None] * len(old_dirs)
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-float(al[i]))
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=float(al[i] - be_i))
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            # The first step is scaled to the gradient's size; later ones are lr.
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda step, x=x_init, d=d: self._evaluate(closure, x, step, d),
                    t,
                    d,
                    loss,
                    flat_grad,
                    gtd,
                    tolerance_change=tolerance_change,
                )
                self._add_to_params(t, d)
                opt_cond = float(flat_grad.abs().max()) <= tolerance_grad
            else:
                self._add_to_params(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = float(flat_grad.abs().max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(d.mul(t).abs().max()) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state.update(
            d=d,
            t=t,
            old_dirs=old_dirs,
            old_stps=old_stps,
            ro=ro,
            H_diag=h_diag,
            prev_flat_grad=prev_flat_grad,
            prev_loss=prev_loss,
        )
        return orig_loss
