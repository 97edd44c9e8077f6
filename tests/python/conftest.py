"""Shared fixtures for the ferrograd Python suite.

Helpers are handed out as fixtures rather than imported, so the suite works under every pytest
import mode (including ``--import-mode=importlib``, where test modules cannot import conftest).
"""

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest


def _as_float(value):
    """A scalar result of ``f`` (ferrograd tensor, numpy value or Python number) as a float."""
    if hasattr(value, "detach"):
        value = value.detach()
        if value.numel() != 1:
            raise ValueError(f"fd_grad needs a scalar-valued function, got shape {value.shape}")
        return float(value.item())
    return float(np.asarray(value, dtype=np.float64).reshape(()))


def fd_grad(f, x, eps=1e-6):
    """Central finite-difference gradient of the scalar function ``f`` at ``x``, in float64.

    ``x`` is a ferrograd tensor (or anything ``np.array`` accepts).  Every perturbed point is a
    fresh float64 copy of ``x.detach().numpy()``, wrapped with ``fg.tensor`` and evaluated under
    ``fg.no_grad()``.  ``f`` maps that tensor to a one-element tensor or a Python/numpy scalar.
    Returns a numpy float64 array with the shape of ``x``.
    """
    if hasattr(x, "detach"):
        base = np.array(x.detach().numpy(), dtype=np.float64, copy=True)
    else:
        base = np.array(x, dtype=np.float64, copy=True)
    grad = np.zeros_like(base)
    with fg.no_grad():
        for idx in np.ndindex(base.shape):
            plus = base.copy()
            minus = base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            f_plus = _as_float(f(fg.tensor(plus, dtype=fg.float64)))
            f_minus = _as_float(f(fg.tensor(minus, dtype=fg.float64)))
            grad[idx] = (f_plus - f_minus) / (2.0 * eps)
    return grad


def check_grads_fd(f, inputs, rtol=1e-6, atol=1e-7):
    """Compare ``fg.autograd.grad`` of the scalar ``f(*inputs)`` with finite differences.

    ``inputs`` are float64 leaves requiring grad.  Each input is perturbed on its own while the
    others are held at their current values.
    """
    out = f(*inputs)
    analytic = fg.autograd.grad(out, list(inputs))
    assert len(analytic) == len(inputs)
    for i, (inp, got) in enumerate(zip(inputs, analytic)):
        assert got is not None, f"no gradient for input {i}"
        assert tuple(got.shape) == tuple(inp.shape)

        def f_i(t, i=i):
            args = [a.detach() for a in inputs]
            args[i] = t
            return f(*args)

        expected = fd_grad(f_i, inp)
        npt.assert_allclose(
            got.detach().numpy(), expected, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}"
        )


@pytest.fixture(name="fd_grad")
def fd_grad_fixture():
    return fd_grad


@pytest.fixture(name="check_grads_fd")
def check_grads_fd_fixture():
    return check_grads_fd


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    """A failing test must not leave grad mode switched off for the tests after it."""
    enabled = fg.is_grad_enabled()
    yield
    if fg.is_grad_enabled() != enabled:
        fg.set_grad_enabled(enabled)
