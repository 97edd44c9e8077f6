"""Check gradients against finite differences: ``gradcheck`` and ``gradgradcheck`` with
``torch.autograd.gradcheck``'s signatures and errors.

Differences from torch (all documented on the functions):

- Only the slow (full Jacobian) mode exists; ``fast_mode=True`` is accepted and runs it too.
- Inputs are perturbed on fresh copies (torch writes into ``input.data`` in place), so ``func``
  must read its inputs from its arguments, not from a closure.
- There is no forward-mode AD and no vmap: ``check_forward_ad``, ``check_batched_grad``,
  ``check_batched_forward_grad``, ``check_fwd_over_rev`` and ``masked`` are accepted and ignored.
- On a Jacobian mismatch the message ends with one more line naming the worst element.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .. import _C
from .._lazy import np
from .function import Function

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]

Tensor = _C.Tensor
_FLOATS = (_C.float32, _C.float64)

FAILED_NONDET_MSG = """

NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` and :func:`gradgradcheck` when a check fails."""


def _as_tuple(x: Any) -> Tuple[Any, ...]:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_float_tensor(t: Any) -> bool:
    return isinstance(t, Tensor) and t.dtype in _FLOATS


def _diff_indices(inputs: Sequence[Any]) -> List[int]:
    return [i for i, t in enumerate(inputs) if _is_float_tensor(t) and t.requires_grad]


def _copy_with(t: Tensor, arr: np.ndarray) -> Tensor:
    from .. import tensor as _tensor

    new = _tensor(arr, dtype=t.dtype)
    if t.requires_grad:
        new.requires_grad_(True)
    return new


def _eval_outputs(func: Callable[..., Any], inputs: Sequence[Any]) -> Tuple[Any, ...]:
    return _as_tuple(func(*inputs))


def _numerical_jacobian(
    func: Callable[..., Any],
    inputs: Tuple[Any, ...],
    outputs: Tuple[Any, ...],
    diff: List[int],
    eps: float,
) -> List[List[np.ndarray]]:
    """``J[i][o]`` of shape ``(numel(input i), numel(output o))`` by central differences."""
    jac: List[List[np.ndarray]] = []
    out_sizes = [o.numel() if isinstance(o, Tensor) else 0 for o in outputs]
    for i in diff:
        base = np.array(inputs[i].detach().numpy(), dtype=np.float64)
        cols = [np.zeros((base.size, n)) for n in out_sizes]
        for j in range(base.size):
            vals = []
            for sign in (1.0, -1.0):
                arr = base.copy().reshape(-1)
                arr[j] += sign * eps
                args = list(inputs)
                args[i] = _copy_with(inputs[i], arr.reshape(base.shape))
                outs = _eval_outputs(func, args)
                vals.append(
                    [
                        np.array(o.detach().numpy(), dtype=np.float64).reshape(-1)
                        if _is_float_tensor(o)
                        else None
                        for o in outs
                    ]
                )
            for k, (p, m) in enumerate(zip(vals[0], vals[1])):
                if p is not None and k < len(cols):
                    cols[k][j, :] = (p - m) / (2 * eps)
        jac.append(cols)
    return jac


def _analytical_jacobian(
    inputs: Tuple[Any, ...], output: Tensor, diff: List[int], check_grad_dtypes: bool
) -> List[np.ndarray]:
    """``J[i]`` of shape ``(numel(input i), numel(output))``, one backward per output element."""
    from .. import tensor as _tensor
    from . import grad as _grad

    jac = [np.zeros((inputs[i].numel(), output.numel())) for i in diff]
    diff_inputs = [inputs[i] for i in diff]
    for k in range(output.numel()):
        onehot = np.zeros(output.numel())
        onehot[k] = 1.0
        v = _tensor(onehot.reshape(tuple(output.shape)), dtype=output.dtype)
        grads = _grad(output, diff_inputs, v, retain_graph=True, allow_unused=True)
        for col, (g, x) in enumerate(zip(grads, diff_inputs)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(x.shape):
                raise GradcheckError("Analytical gradient has incorrect size")
            if check_grad_dtypes and g.dtype != x.dtype:
                raise GradcheckError("Gradient has dtype mismatch")
            jac[col][:, k] = np.array(g.detach().numpy(), dtype=np.float64).reshape(-1)
    return jac


def _fmt(a: np.ndarray) -> str:
    from .. import tensor as _tensor

    return repr(_tensor(a, dtype=_C.float64))


def _mismatch_msg(o: int, i: int, n: np.ndarray, a: np.ndarray, atol: float, rtol: float) -> str:
    msg = (
        f"Jacobian mismatch for output {o} with respect to input {i},\n"
        f"numerical:{_fmt(n)}\nanalytical:{_fmt(a)}\n"
    )
    excess = np.abs(a - n) - (atol + rtol * np.abs(n))
    excess = np.where(np.isnan(excess), np.inf, excess)
    j, k = np.unravel_index(int(np.argmax(excess)), excess.shape)
    msg += (
        f"The worst mismatch is at input {i} element {int(j)} (flat) and output {o} element "
        f"{int(k)} (flat): numerical {n[j, k]!r}, analytical {a[j, k]!r}, "
        f"difference {abs(a[j, k] - n[j, k])!r} (atol={atol}, rtol={rtol}).\n"
    )
    return msg


class _UndefinedGrad(Function):
    """Identity whose backward sends no gradient (torch's ``UndefinedGrad``)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        return None


def _check_undefined_grad(
    inputs: Tuple[Any, ...], func: Callable[..., Any], diff: List[int]
) -> bool:
    from . import grad as _grad

    outs = [o for o in _eval_outputs(func, inputs) if _is_float_tensor(o) and o.requires_grad]
    diff_inputs = [inputs[i] for i in diff]
    for o in outs:
        u = _UndefinedGrad.apply(o)
        grads = _grad(u.sum(), diff_inputs, allow_unused=True)
        for g in grads:
            if g is not None and np.any(g.detach().numpy() != 0):
                raise GradcheckError(
                    "Expected backward function to handle undefined output grads. Please look "
                    'at "Notes about undefined output gradients" in '
                    '"tools/autograd/derivatives.yaml"'
                )
    return True


def gradcheck(
    func: Callable[..., Union[Tensor, Sequence[Tensor]]],
    inputs: Union[Tensor, Sequence[Any]],
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: Optional[bool] = None,
) -> bool:
    """Check the gradients of ``func`` at ``inputs`` against central finite differences.

    For every float output and every input that requires grad, the analytical Jacobian (one
    backward per output element) must be close to the numerical one: ``|a - n| <= atol +
    rtol * |n|`` elementwise. Backward is also run twice to check it is reentrant (within
    ``nondet_tol``), and, with ``check_undefined_grad``, once with no gradient arriving.

    Raises :class:`GradcheckError` (a ``RuntimeError``) on failure, or returns ``False`` when
    ``raise_exception=False``. Inputs should be float64: others trigger torch's ``UserWarning``.

    Accepted for compatibility and ignored (ferrograd has no forward-mode AD and no vmap):
    ``check_batched_grad``, ``check_batched_forward_grad``, ``check_forward_ad``, ``masked``;
    ``fast_mode=True`` runs the full (slow) check. Inputs are perturbed on fresh copies rather
    than in place, so ``func`` must take everything it differentiates as arguments.
    """
    del check_batched_grad, check_batched_forward_grad, check_forward_ad, fast_mode, masked
    try:
        return _gradcheck(
            func,
            _as_tuple(inputs),
            eps,
            atol,
            rtol,
            nondet_tol,
            check_undefined_grad,
            check_grad_dtypes,
            check_backward_ad,
        )
    except GradcheckError:
        if raise_exception:
            raise
        return False


# ``ferrograd.autograd.gradcheck`` is the function (as in torch); keep the error class reachable
# as ``ferrograd.autograd.gradcheck.GradcheckError`` through it too.
gradcheck.GradcheckError = GradcheckError  # type: ignore[attr-defined]


def _gradcheck(
    func: Callable[..., Any],
    inputs: Tuple[Any, ...],
    eps: float,
    atol: float,
    rtol: float,
    nondet_tol: float,
    check_undefined_grad: bool,
    check_grad_dtypes: bool,
    check_backward_ad: bool,
) -> bool:
    diff = _diff_indices(inputs)
    if not any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of them "
            "have requires_grad=True."
        )
    for idx, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad and t.dtype != _C.float64:
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ",
                UserWarning,
                stacklevel=3,
            )
    if not check_backward_ad:
        return True
    outputs = _eval_outputs(func, inputs)
    numerical = _numerical_jacobian(func, inputs, outputs, diff, eps)
    for o_idx, out in enumerate(outputs):
        if not _is_float_tensor(out):
            continue  # integer and non-tensor outputs are not differentiable
        if not out.requires_grad:
            for col in range(len(diff)):
                n = numerical[col][o_idx]
                if not np.allclose(n, 0.0, rtol=rtol, atol=atol):
                    raise GradcheckError("Numerical gradient for function expected to be zero")
            continue
        first = _analytical_jacobian(inputs, out, diff, check_grad_dtypes)
        second = _analytical_jacobian(inputs, out, diff, check_grad_dtypes)
        for a1, a2 in zip(first, second):
            if a1.size and float(np.max(np.abs(a1 - a2))) > nondet_tol:
                raise GradcheckError(
                    "Backward is not reentrant, i.e., running backward with same input and "
                    "grad_output multiple times gives different values, although analytical "
                    "gradient matches numerical gradient."
                    f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG
                )
        for col, i in enumerate(diff):
            a, n = first[col], numerical[col][o_idx]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                raise GradcheckError(_mismatch_msg(o_idx, i, n, a, atol, rtol))
    if check_undefined_grad and diff:
        _check_undefined_grad(inputs, func, diff)
    return True


def gradgradcheck(
    func: Callable[..., Union[Tensor, Sequence[Tensor]]],
    inputs: Union[Tensor, Sequence[Any]],
    grad_outputs: Optional[Union[Tensor, Sequence[Tensor]]] = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Check second derivatives: :func:`gradcheck` of the map
    ``(inputs, grad_outputs) -> autograd.grad(func(inputs), inputs, grad_outputs,
    create_graph=True)``.

    Without ``grad_outputs``, random ones (float64 normal, seeded from a fixed NumPy generator
    so the global ferrograd seed is untouched) that require grad are made, as torch does.
    ``gen_non_contig_grad_outputs`` makes them non-contiguous (transposed storage).
    ``check_fwd_over_rev``, ``check_batched_grad`` and ``masked`` are accepted and ignored (no
    forward-mode AD, no vmap); ``check_rev_over_rev=False`` skips the check.
    """
    del check_fwd_over_rev, check_batched_grad, masked
    from .. import tensor as _tensor
    from . import grad as _grad

    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        outs = _eval_outputs(func, tupled_inputs)
        made = []
        for o in outs:
            if not (_is_float_tensor(o) and o.requires_grad):
                continue
            arr = rng.standard_normal(tuple(o.shape))
            if gen_non_contig_grad_outputs and arr.ndim >= 2:
                g = _tensor(np.ascontiguousarray(arr.swapaxes(0, 1)), dtype=o.dtype)
                g = g.transpose(0, 1)
            else:
                g = _tensor(arr, dtype=o.dtype)
            made.append(g.requires_grad_(True) if g.is_leaf else g)
        tupled_grads: Tuple[Any, ...] = tuple(made)
    else:
        tupled_grads = _as_tuple(grad_outputs)
    if not check_rev_over_rev:
        return True
    n_in = len(tupled_inputs)

    def new_func(*args: Any) -> Tuple[Tensor, ...]:
        ins, gos = args[:n_in], args[n_in:]
        outs = [o for o in _eval_outputs(func, ins) if _is_float_tensor(o) and o.requires_grad]
        diff_ins = [t for t in ins if _is_float_tensor(t) and t.requires_grad]
        grads = _grad(outs, diff_ins, list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        new_func,
        tupled_inputs + tupled_grads,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        fast_mode=fast_mode,
    )
