"""Anomaly detection (reference section 1.11)."""

import contextlib
import math
import re
import warnings

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

ENABLED_WARNING = (
    "Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
    "enabled for debugging."
)
ANOMALY_INPLACE_HINT = (
    "Hint: the backtrace further above shows the operation that failed to compute its gradient. "
    "The variable in question was changed in there or anywhere later. Good luck!"
)


def nan_msg(node, index=0):
    return re.escape(f"Function '{node}' returned nan values in its {index}th output.")


@pytest.fixture(autouse=True)
def _anomaly_off_afterwards():
    yield
    fg.autograd.set_detect_anomaly(False)


@contextlib.contextmanager
def anomaly(**kwargs):
    """detect_anomaly() with its UserWarnings (checked in their own tests) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with fg.autograd.detect_anomaly(**kwargs):
            yield


def negative_leaf():
    return fg.tensor([-1.0], requires_grad=True)


def test_entering_detect_anomaly_warns():
    with pytest.warns(UserWarning, match=re.escape(ENABLED_WARNING)), fg.autograd.detect_anomaly():
        pass


def test_nan_in_backward_names_the_backward_node():
    x = negative_leaf()
    y = x**0.5
    assert math.isnan(y.item())
    with anomaly(), pytest.raises(RuntimeError, match=nan_msg("PowBackward0")):
        y.sum().backward()


def test_nan_in_sqrt_backward_names_sqrt_node():
    x = negative_leaf()
    if not hasattr(x, "sqrt"):
        pytest.skip("sqrt is not part of the ferrograd op set")
    y = x.sqrt()
    with anomaly(), pytest.raises(RuntimeError, match=nan_msg("SqrtBackward0")):
        y.sum().backward()


def test_nan_check_reports_index_of_offending_output():
    a = fg.tensor([1.0], requires_grad=True)
    b = negative_leaf()
    c = b.log() * a  # grad for input 1 (a) is log(-1) = nan; grad for input 0 is finite
    with anomaly(), pytest.raises(RuntimeError, match=nan_msg("MulBackward0", 1)):
        c.sum().backward()


def test_nan_check_first_output():
    x = negative_leaf()
    lg = x.log()
    with anomaly(), pytest.raises(RuntimeError, match=nan_msg("MulBackward0", 0)):
        (lg * lg).sum().backward()


def test_nan_passes_through_without_anomaly_mode():
    x = negative_leaf()
    (x**0.5).sum().backward()
    assert np.isnan(x.grad.numpy()).all()


def test_check_nan_false_lets_nan_through():
    x = negative_leaf()
    y = x**0.5
    with anomaly(check_nan=False):
        y.sum().backward()
    assert np.isnan(x.grad.numpy()).all()


def test_finite_backward_under_anomaly_mode_is_unchanged():
    a = np.array([0.5, 2.0])
    x = fg.tensor(a, requires_grad=True, dtype=fg.float64)
    with anomaly():
        (x.sin() * x.exp()).sum().backward()
    npt.assert_allclose(x.grad.numpy(), np.exp(a) * (np.sin(a) + np.cos(a)), rtol=1e-12)


def test_set_detect_anomaly_on_and_off():
    fg.autograd.set_detect_anomaly(True)
    x = negative_leaf()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(RuntimeError, match=nan_msg("PowBackward0")):
            (x**0.5).sum().backward()
    fg.autograd.set_detect_anomaly(False)
    z = negative_leaf()
    (z**0.5).sum().backward()
    assert np.isnan(z.grad.numpy()).all()


def test_detect_anomaly_context_restores_previous_state():
    with anomaly():
        pass
    x = negative_leaf()
    (x**0.5).sum().backward()
    assert np.isnan(x.grad.numpy()).all()


def test_anomaly_mode_warns_with_failing_node_name_and_reraises_original_error():
    class Boom(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    x = fg.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fg.autograd.detect_anomaly():
            y = Boom.apply(x).sum()
            with pytest.raises(ValueError, match="boom"):
                y.backward()
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert any(m.startswith("Error detected in BoomBackward.") for m in messages), messages


def test_anomaly_mode_changes_inplace_error_hint():
    x = fg.ones(3, requires_grad=True)
    with anomaly():
        y = x.exp()
        y.add_(1)
        with pytest.raises(RuntimeError, match=re.escape(ANOMALY_INPLACE_HINT)):
            y.sum().backward()


def test_anomaly_mode_inplace_error_still_names_forward_op():
    x = fg.ones(3, requires_grad=True)
    with anomaly():
        y = x.exp()
        y.add_(1)
        with pytest.raises(RuntimeError, match=r"which is output 0 of Exp, is at version 1"):
            y.sum().backward()
