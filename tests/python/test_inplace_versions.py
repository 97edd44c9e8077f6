"""In-place ops and version counters (reference section 1.8)."""

import re

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF_INPLACE = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
)
# The bracketed tensor description is torch-specific ("[torch.FloatTensor [3]]"); the hint after
# "instead." names torch.autograd.set_detect_anomaly, so both are left out of the match.
MODIFIED_PREFIX = (
    r"one of the variables needed for gradient computation has been modified by an inplace "
    r"operation: \[.*\]"
)


def modified_output_of(op, version, expected=0):
    return MODIFIED_PREFIX + re.escape(
        f", which is output 0 of {op}, is at version {version}; "
        f"expected version {expected} instead."
    )


def modified_leaf(version, expected=0):
    # no ", which is output ..." part for a saved leaf / tensor without grad_fn
    return r"modified by an inplace operation: \[[^,]*\] " + re.escape(
        f"is at version {version}; expected version {expected} instead."
    )


def npv(t):
    return t.detach().numpy()


# --------------------------------------------------------------------------------------------
# saved tensors modified after saving
# --------------------------------------------------------------------------------------------


def test_modifying_saved_output_raises_naming_forward_op():
    x = fg.ones(3, requires_grad=True)
    y = x.exp()  # ExpBackward0 saves its result
    y.add_(1)
    with pytest.raises(RuntimeError, match=modified_output_of("Exp", 1)):
        y.sum().backward()


def test_error_reports_current_version_after_several_inplace_ops():
    x = fg.ones(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    y.mul_(2)
    with pytest.raises(RuntimeError, match=modified_output_of("Exp", 2)):
        y.sum().backward()


def test_modifying_saved_output_via_augmented_assignment_raises():
    x = fg.ones(3, requires_grad=True)
    y = x.exp()
    y += 1
    with pytest.raises(RuntimeError, match=r"is at version 1; expected version 0 instead"):
        y.sum().backward()


def test_modifying_saved_non_grad_tensor_raises_without_output_description():
    x = fg.ones(3, requires_grad=True)
    b = fg.ones(3)
    c = x * b  # saves b to compute x's gradient
    b.add_(1)
    with pytest.raises(RuntimeError, match=modified_leaf(1)):
        c.sum().backward()


def test_modifying_saved_tensor_also_breaks_autograd_grad():
    x = fg.ones(3, requires_grad=True)
    y = x.exp()
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        fg.autograd.grad(y.sum(), x)


@pytest.mark.parametrize("modified", [0, 1])
def test_failed_backward_leaves_saved_tensors_for_the_next_attempt(modified):
    # A backward without retain_graph takes each node's saved tensors out as its rule runs.
    # When one of a node's two saved tensors fails its version check, the other may already
    # be out: both must be back, so a second attempt fails the same way (torch frees a node's
    # saved tensors only after its rule succeeds), not with "backward a second time".
    x = fg.ones(3, requires_grad=True)
    a, b = x * 2, x * 3
    c = a * b  # MulBackward0 saves both operands
    (a, b)[modified].add_(1)
    op = "Mul"
    for _ in range(2):
        with pytest.raises(RuntimeError, match=modified_output_of(op, 1)):
            c.sum().backward()


def test_modifying_input_of_op_that_saves_only_its_result_is_fine():
    a = np.array([0.5, 1.0, -1.0])
    x = fg.tensor(a, requires_grad=True, dtype=fg.float64)
    y = x * 2
    z = y.exp()  # exp saves its result, not y
    y.add_(1)
    z.sum().backward()
    npt.assert_allclose(npv(x.grad), 2 * np.exp(2 * a), rtol=1e-12)


def test_modifying_input_of_add_is_fine():
    x = fg.ones(3, requires_grad=True)
    y = x * 2
    z = y + 1  # add saves nothing
    y.add_(1)
    z.sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 2.0])


@pytest.mark.parametrize(
    ("label", "op", "dx"),
    [
        ("add_", lambda t: t.add_(1.0), 1.0),
        ("sub_", lambda t: t.sub_(5.0), 1.0),
        ("mul_", lambda t: t.mul_(3.0), 3.0),
        ("div_", lambda t: t.div_(2.0), 0.5),
    ],
)
def test_inplace_on_unsaved_intermediate_gives_correct_grad(label, op, dx):
    x = fg.ones(3, requires_grad=True)
    y = x * 1
    op(y)
    y.sum().backward()
    npt.assert_allclose(npv(x.grad), [dx] * 3)


def test_inplace_after_backward_does_not_matter():
    x = fg.ones(3, requires_grad=True)
    y = x.exp()
    y.sum().backward()
    y.add_(1)
    npt.assert_allclose(npv(x.grad), np.full(3, np.e), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# leaves
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.add_(1),
        lambda t: t.sub_(1),
        lambda t: t.mul_(2),
        lambda t: t.div_(2),
        lambda t: t.zero_(),
        lambda t: t.fill_(3.0),
        lambda t: t.copy_(fg.zeros(3)),
        lambda t: t.__iadd__(1),
        lambda t: t.__imul__(2),
    ],
    ids=["add_", "sub_", "mul_", "div_", "zero_", "fill_", "copy_", "+=", "*="],
)
def test_inplace_on_leaf_requiring_grad_raises(op):
    x = fg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(LEAF_INPLACE)):
        op(x)
    npt.assert_array_equal(npv(x), [1.0, 1.0, 1.0])


def test_inplace_on_view_of_leaf_requiring_grad_raises():
    x = fg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(VIEW_OF_LEAF_INPLACE)):
        x[:2].mul_(2)


def test_inplace_on_leaf_allowed_under_no_grad():
    x = fg.ones(3, requires_grad=True)
    with fg.no_grad():
        x.add_(1)
        x.mul_(2)
    assert x.is_leaf
    assert x.requires_grad
    assert x.grad_fn is None
    npt.assert_array_equal(npv(x), [4.0, 4.0, 4.0])
    (x * x).sum().backward()
    npt.assert_array_equal(npv(x.grad), [8.0, 8.0, 8.0])


def test_inplace_on_leaf_under_no_grad_bumps_version():
    x = fg.ones(3, requires_grad=True)
    w = fg.ones(3, requires_grad=True)
    c = x * w  # saves x (for w's grad)
    with fg.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match=modified_leaf(1)):
        c.sum().backward()


def test_inplace_on_leaf_without_requires_grad_is_allowed():
    t = fg.ones(3)
    t.add_(2)
    npt.assert_array_equal(t.numpy(), [3.0, 3.0, 3.0])


# --------------------------------------------------------------------------------------------
# detach shares the version counter
# --------------------------------------------------------------------------------------------


def test_inplace_through_detached_alias_is_allowed_and_writes_through():
    x = fg.ones(3, requires_grad=True)
    x.detach().add_(1)
    assert x.is_leaf
    assert x.requires_grad
    npt.assert_array_equal(npv(x), [2.0, 2.0, 2.0])


def test_inplace_through_detached_alias_bumps_shared_version():
    x = fg.ones(3, requires_grad=True)
    w = fg.ones(3, requires_grad=True)
    c = x * w
    x.detach().add_(1)
    with pytest.raises(RuntimeError, match=modified_leaf(1)):
        c.sum().backward()


def test_inplace_through_detached_alias_of_saved_output_is_detected():
    x = fg.ones(3, requires_grad=True)
    y = x.exp()
    y.detach().mul_(2)
    with pytest.raises(RuntimeError, match=modified_output_of("Exp", 1)):
        y.sum().backward()


# --------------------------------------------------------------------------------------------
# views of non-leaves
# --------------------------------------------------------------------------------------------


def test_inplace_on_view_of_non_leaf_rebases_history():
    x = fg.ones(3, requires_grad=True)
    h = x * 1
    h[:2].mul_(2)
    npt.assert_array_equal(npv(h), [2.0, 2.0, 1.0])
    h.sum().backward()
    npt.assert_array_equal(npv(x.grad), [2.0, 2.0, 1.0])


def test_inplace_on_view_writes_through_to_base():
    t = fg.zeros(2, 3)
    t[1].fill_(5.0)
    t[:, 0].add_(1.0)
    npt.assert_array_equal(t.numpy(), [[1.0, 0.0, 0.0], [6.0, 5.0, 5.0]])
