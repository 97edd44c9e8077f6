"""``nn.utils.parametrize`` and ``nn.utils.parametrizations`` (weight_norm, spectral_norm,
orthogonal), and the hook-based ``nn.utils.weight_norm``/``spectral_norm``: closed forms
(g v/||v||, the top singular value from numpy's SVD, W^T W = I), float64 finite-difference
gradients, state_dict keys, torch's errors, and torch's values from the same initial tensors."""

from __future__ import annotations

import copy
import pickle
import re
import warnings

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.autograd import gradcheck
from ferrograd.nn.utils import parametrizations as PZ
from ferrograd.nn.utils import parametrize as P


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class Scale(nn.Module):
    """x -> 2x, no right_inverse."""

    def forward(self, X):
        return 2 * X


class Double(nn.Module):
    """x -> 2x, with right_inverse x -> x/2."""

    def forward(self, X):
        return 2 * X

    def right_inverse(self, X):
        return X / 2


class RankOne(nn.Module):
    def forward(self, x, y):
        return x.unsqueeze(-1) @ y.unsqueeze(-2)

    def right_inverse(self, Z):
        U, S, Vh = fg.linalg.svd(Z, full_matrices=False)
        s0 = S[0].sqrt().unsqueeze(-1)
        return U[..., :, 0] * s0, Vh[..., 0, :] * s0


def linear64(i=4, o=4, seed=0):
    fg.manual_seed(seed)
    return nn.Linear(i, o, dtype=fg.float64)


# ----- parametrize ---------------------------------------------------------------------------


def test_register_layout_and_state_dict():
    m = linear64()
    w0 = m.weight.detach().numpy().copy()
    weight = m.weight
    P.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear" and isinstance(m, nn.Linear)
    assert P.type_before_parametrizations(m) is nn.Linear
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias") and not P.is_parametrized(linear64())
    assert isinstance(m.parametrizations.weight, P.ParametrizationList)
    # right_inverse gave the original its value, in the same tensor object.
    assert m.parametrizations.weight.original is weight
    np.testing.assert_array_equal(weight.detach().numpy(), np.triu(w0))
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "parametrizations.weight.original"]
    w = m.weight.detach().numpy()
    np.testing.assert_array_equal(w, np.triu(w0) + np.triu(w0, 1).T)
    assert repr(m) == (
        "ParametrizedLinear(\n  in_features=4, out_features=4, bias=True\n"
        "  (parametrizations): ModuleDict(\n    (weight): ParametrizationList(\n"
        "      (0): Symmetric()\n    )\n  )\n)"
    )


def test_forward_and_gradient_go_through_the_parametrization():
    m = linear64()
    P.register_parametrization(m, "weight", Symmetric())
    x = fg.randn(3, 4, dtype=fg.float64)
    y = m(x)
    w = m.weight.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), x.numpy() @ w.T + m.bias.detach().numpy())
    y.sum().backward()
    # d/dA sum(x (A_u + A_u1^T)^T): G = ones^T x, then the symmetrisation's adjoint.
    G = np.ones((3, 4)).T @ x.numpy()
    expected = np.triu(G) + np.triu(G.T, 1)
    np.testing.assert_allclose(m.parametrizations.weight.original.grad.numpy(), expected)


def test_gradcheck_through_parametrization():
    m = linear64(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    P.register_parametrization(m, "weight", Double())
    x = fg.randn(2, 3, dtype=fg.float64)
    orig = m.parametrizations.weight.original

    def f(o):
        with fg.no_grad():
            orig.copy_(o)
        return m(x)

    # The function of the original as torch.func would see it: compose the list directly.
    def g(o):
        return nn.functional.linear(x, Double()(Symmetric()(o)), m.bias)

    assert gradcheck(g, (orig.detach().clone().requires_grad_(),))
    np.testing.assert_allclose(f(orig.detach()).detach().numpy(), g(orig.detach()).detach().numpy())


def test_chained_parametrizations_and_assignment():
    m = linear64(3, 3)
    w0 = m.weight.detach().numpy().copy()
    P.register_parametrization(m, "weight", Double())
    P.register_parametrization(m, "weight", Double())
    assert len(m.parametrizations.weight) == 2
    # Only the first registration sets the original (through right_inverse: w0/2); the
    # second is chained after it, as torch's.
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w0)
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), w0 / 2)
    A = fg.randn(3, 3, dtype=fg.float64)
    m.weight = A
    np.testing.assert_allclose(m.weight.detach().numpy(), A.numpy())
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), A.numpy() / 4)


def test_no_right_inverse():
    m = linear64(3, 3)
    w0 = m.weight.detach().numpy().copy()
    P.register_parametrization(m, "weight", Scale())
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w0)
    with pytest.raises(
        RuntimeError, match="parametrization Scale does not implement right_inverse"
    ):
        m.weight = fg.zeros(3, 3, dtype=fg.float64)


def test_multiple_originals():
    m = linear64(4, 4)
    P.register_parametrization(m, "weight", RankOne())
    keys = list(m.state_dict())
    assert keys == [
        "bias",
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    s = np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)
    assert s[1] < 1e-12 * s[0]  # rank one
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
            "parametrized in terms of a sequence of tensors."
        ),
    ):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
    w = m.weight.detach().numpy()
    P.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), w)


def test_remove_parametrizations():
    m = linear64(3, 3)
    P.register_parametrization(m, "weight", Scale())
    orig = m.parametrizations.weight.original
    o = orig.detach().numpy().copy()
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    assert m.weight is orig
    np.testing.assert_array_equal(m.weight.detach().numpy(), o)
    P.register_parametrization(m, "weight", Scale())
    P.register_parametrization(m, "bias", Scale())
    P.remove_parametrizations(m, "weight")  # leave_parametrized=True: the value 2*o
    assert m.weight is orig and type(m).__name__ == "ParametrizedLinear"
    np.testing.assert_array_equal(m.weight.detach().numpy(), 2 * o)
    assert list(m.state_dict()) == ["weight", "parametrizations.bias.original"]
    P.remove_parametrizations(m, "bias")
    assert type(m) is nn.Linear
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(m, "weight")


def test_buffer_parametrization():
    m = nn.Module()
    m.register_buffer("b", fg.ones(3, dtype=fg.float64))
    P.register_parametrization(m, "b", Scale())
    assert list(m.state_dict()) == ["parametrizations.b.original"]
    assert not list(m.parameters())
    np.testing.assert_array_equal(m.b.numpy(), [2, 2, 2])


def test_cached():
    calls = []

    class Counting(nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 1

    m = linear64(3, 3)
    P.register_parametrization(m, "weight", Counting())
    calls.clear()
    _ = m.weight
    _ = m.weight
    assert len(calls) == 2
    calls.clear()
    with P.cached():
        a = m.weight
        with P.cached():
            b = m.weight
        c = m.weight
    assert len(calls) == 1 and a is b is c
    _ = m.weight
    assert len(calls) == 2  # the cache is gone


def test_unsafe_and_consistency_errors():
    class Bad(nn.Module):
        def forward(self, X):
            return X[:1]

    class ToFloat(nn.Module):
        def forward(self, X):
            return X.float()

    m = linear64(3, 3)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Registering a parametrization may not change the shape of the tensor, unless "
            "`unsafe` flag is enabled.\nunparametrized shape: "
        ),
    ):
        P.register_parametrization(m, "weight", Bad())
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Registering a parametrization may not change the dtype of the tensor, unless "
            "`unsafe` flag is enabled."
        ),
    ):
        P.register_parametrization(m, "weight", ToFloat())
    assert type(m) is nn.Linear  # nothing registered
    P.register_parametrization(m, "weight", Bad(), unsafe=True)
    assert tuple(m.weight.shape) == (1, 3)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "does not have a parameter, a buffer, or a parametrized element with name 'nope'"
        ),
    ):
        P.register_parametrization(m, "nope", Scale())
    with pytest.raises(ValueError, match="ParametrizationList requires one or more modules."):
        P.ParametrizationList([], fg.zeros(2))


def test_unsafe_right_inverse_of_another_shape():
    class Flat(nn.Module):
        def forward(self, X):
            return X.reshape(2, 3)

        def right_inverse(self, X):
            return X.reshape(-1)

    m = nn.Module()
    m.w = nn.Parameter(fg.arange(6.0, dtype=fg.float64).reshape(2, 3))
    P.register_parametrization(m, "w", Flat(), unsafe=True)
    assert tuple(m.parametrizations.w.original.shape) == (6,)
    np.testing.assert_array_equal(m.w.detach().numpy(), np.arange(6.0).reshape(2, 3))


def test_parametrized_module_copies_but_does_not_pickle():
    m = linear64(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    c = copy.deepcopy(m)
    assert type(c).__name__ == "ParametrizedLinear"
    np.testing.assert_array_equal(c.weight.detach().numpy(), m.weight.detach().numpy())
    assert c.parametrizations.weight.original is not m.parametrizations.weight.original
    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only"):
        pickle.dumps(m)


def test_load_state_dict_round_trip():
    a, b = linear64(3, 3, seed=1), linear64(3, 3, seed=2)
    for m in (a, b):
        P.register_parametrization(m, "weight", Symmetric())
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())


def test_transfer_parametrizations():
    a, b = linear64(3, 3, seed=1), linear64(3, 3, seed=2)
    P.register_parametrization(a, "weight", Symmetric())
    P.transfer_parametrizations_and_params(a, b)
    assert b.parametrizations.weight.original is a.parametrizations.weight.original
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())


def test_train_mode_follows_module():
    m = linear64().eval()
    sn = PZ.spectral_norm(m)
    assert not sn.parametrizations.weight[0].training


# ----- weight_norm ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, None, -2])
def test_weight_norm_closed_form(dim):
    fg.manual_seed(3)
    m = nn.Conv2d(3, 4, 2, dtype=fg.float64) if dim == -2 else linear64(5, 3)
    w0 = m.weight.detach().numpy().copy()
    PZ.weight_norm(m, dim=dim)
    g = m.parametrizations.weight.original0
    v = m.parametrizations.weight.original1
    if dim is None:
        assert tuple(g.shape) == ()
    elif dim == -2:
        assert tuple(g.shape) == (1, 1, 2, 1)  # dim -2 of a (4, 3, 2, 2) weight
    else:
        assert tuple(g.shape) == tuple(1 if i != dim else w0.shape[dim] for i in range(2))
    # The weight is unchanged, and equals g v / ||v|| for new g, v.
    np.testing.assert_allclose(m.weight.detach().numpy(), w0, rtol=1e-12)
    with fg.no_grad():
        g.copy_(fg.rand(*g.shape, dtype=fg.float64) + 0.5)
        v.copy_(fg.randn(*v.shape, dtype=fg.float64))
    gn, vn = g.detach().numpy(), v.detach().numpy()
    d = -1 if dim is None else dim % vn.ndim
    axes = tuple(range(vn.ndim)) if dim is None else tuple(i for i in range(vn.ndim) if i != d)
    expected = gn * vn / np.sqrt((vn**2).sum(axis=axes, keepdims=dim is not None))
    np.testing.assert_allclose(m.weight.detach().numpy(), expected, rtol=1e-12)


def test_weight_norm_gradcheck():
    fn = PZ._WeightNorm(0)
    g = fg.rand(3, 1, dtype=fg.float64, requires_grad=True)
    v = fg.randn(3, 4, dtype=fg.float64, requires_grad=True)
    assert gradcheck(fn, (g, v))


def test_weight_norm_loads_old_state_dict():
    fg.manual_seed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = nn.utils.weight_norm(linear64(4, 3))
    assert sorted(old.state_dict()) == ["bias", "weight_g", "weight_v"]
    new = PZ.weight_norm(linear64(4, 3, seed=5))
    new.load_state_dict(old.state_dict())
    x = fg.randn(2, 4, dtype=fg.float64)
    np.testing.assert_allclose(new(x).detach().numpy(), old(x).detach().numpy(), rtol=1e-12)


def test_old_weight_norm_hooks():
    m = linear64(4, 3)
    w0 = m.weight.detach().numpy().copy()
    with pytest.warns(FutureWarning, match="torch.nn.utils.weight_norm` is deprecated"):
        nn.utils.weight_norm(m)
    assert tuple(m.weight_g.shape) == (3, 1) and tuple(m.weight_v.shape) == (3, 4)
    assert not isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), w0, rtol=1e-12)
    with fg.no_grad():
        m.weight_g.mul_(2)
    x = fg.randn(2, 4, dtype=fg.float64)
    y = m(x)  # the hook recomputes the weight
    np.testing.assert_allclose(y.detach().numpy(), x.numpy() @ (2 * w0).T + m.bias.detach().numpy())
    y.sum().backward()
    assert m.weight_g.grad is not None and m.weight_v.grad is not None
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            nn.utils.weight_norm(m)
    nn.utils.remove_weight_norm(m)
    assert isinstance(m.weight, nn.Parameter) and list(m.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w0, rtol=1e-12)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in Linear"):
        nn.utils.remove_weight_norm(m)


# ----- spectral_norm -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, dim",
    [
        (lambda: nn.Linear(6, 4, dtype=fg.float64), 0),
        (lambda: nn.Conv2d(3, 5, 3, dtype=fg.float64), 0),
        (lambda: nn.ConvTranspose2d(3, 5, 3, dtype=fg.float64), 1),
    ],
)
def test_spectral_norm_converges_to_svd(make, dim):
    fg.manual_seed(5)
    m = make()
    W = m.weight.detach().numpy().copy()
    PZ.spectral_norm(m, n_power_iterations=3)
    assert list(m.state_dict())[-3:] == [
        "parametrizations.weight.original",
        "parametrizations.weight.0._u",
        "parametrizations.weight.0._v",
    ]
    for _ in range(30):
        _ = m.weight
    mat = np.moveaxis(W, dim, 0).reshape(W.shape[dim], -1)
    sigma = np.linalg.svd(mat, compute_uv=False)[0]
    np.testing.assert_allclose(m.weight.detach().numpy(), W / sigma, rtol=1e-8)
    sn = np.linalg.svd(
        np.moveaxis(m.weight.detach().numpy(), dim, 0).reshape(mat.shape), compute_uv=False
    )[0]
    assert abs(sn - 1) < 1e-8


def test_spectral_norm_eval_does_not_iterate():
    m = PZ.spectral_norm(linear64(5, 4))
    u = m.parametrizations.weight[0]._u
    before = u.numpy().copy()
    m.eval()
    _ = m.weight
    _ = m.weight
    np.testing.assert_array_equal(u.numpy(), before)
    m.train()
    _ = m.weight
    assert m.parametrizations.weight[0]._u is u  # updated in place
    assert not np.array_equal(u.numpy(), before)


def test_spectral_norm_gradcheck_and_errors():
    m = PZ.spectral_norm(linear64(4, 3)).eval()
    sn = m.parametrizations.weight[0]
    W = m.parametrizations.weight.original.detach().clone().requires_grad_()
    assert gradcheck(sn, (W,))
    with pytest.raises(
        IndexError,
        match=re.escape("Dimension out of range (expected to be in range of [-2, 1] but got 2)"),
    ):
        PZ.spectral_norm(linear64(), dim=2)
    with pytest.raises(
        ValueError, match="Expected n_power_iterations to be positive, but got n_power_iterations=0"
    ):
        PZ.spectral_norm(linear64(), n_power_iterations=0)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'nope'"):
        PZ.spectral_norm(linear64(), name="nope")
    # A vector is just normalised.
    m = nn.Module()
    m.v = nn.Parameter(fg.tensor([3.0, 4.0], dtype=fg.float64))
    PZ.spectral_norm(m, name="v")
    np.testing.assert_allclose(m.v.detach().numpy(), [0.6, 0.8])


def test_old_spectral_norm():
    fg.manual_seed(6)
    m = nn.utils.spectral_norm(linear64(6, 4), n_power_iterations=2)
    W = m.weight_orig.detach().numpy().copy()
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_orig"]
    assert tuple(m.weight_u.shape) == (4,) and tuple(m.weight_v.shape) == (6,)
    sd = m.state_dict()
    assert list(sd) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert sd._metadata[""]["spectral_norm"] == {"weight.version": 1}
    x = fg.randn(3, 6, dtype=fg.float64)
    for _ in range(40):
        y = m(x)
    sigma = np.linalg.svd(W, compute_uv=False)[0]
    np.testing.assert_allclose(m.weight.detach().numpy(), W / sigma, rtol=1e-8)
    y.sum().backward()
    assert m.weight_orig.grad is not None
    m.eval()
    u = m.weight_u.numpy().copy()
    m(x)
    np.testing.assert_array_equal(m.weight_u.numpy(), u)
    copy_ = nn.utils.spectral_norm(linear64(6, 4, seed=9))
    copy_.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(copy_.weight_u.numpy(), u)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        nn.utils.spectral_norm(m)
    nn.utils.remove_spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"] and not m._state_dict_hooks
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in Linear"):
        nn.utils.remove_spectral_norm(m)


def test_old_spectral_norm_version0_checkpoint():
    # Version 0 saved the normalised weight itself and no weight_v.
    m = nn.utils.spectral_norm(linear64(5, 3))
    for _ in range(20):
        m(fg.zeros(1, 5, dtype=fg.float64))
    sd = dict(m.state_dict())
    sd["weight"] = m.weight.detach()
    v = sd.pop("weight_v").numpy()
    other = nn.utils.spectral_norm(linear64(5, 3, seed=3))
    other.load_state_dict(sd)
    u = sd["weight_u"].numpy()
    W = sd["weight_orig"].numpy()
    # The recovered v gives the same sigma.
    np.testing.assert_allclose(u @ W @ other.weight_v.numpy(), u @ W @ v, rtol=1e-8)


# ----- orthogonal ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 4, 4)])
@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
def test_orthogonal(shape, omap):
    fg.manual_seed(7)
    m = nn.Module()
    m.weight = nn.Parameter(fg.randn(*shape, dtype=fg.float64))
    PZ.orthogonal(m, orthogonal_map=omap)
    W = m.weight.detach().numpy()
    if shape[-2] < shape[-1]:
        W = np.swapaxes(W, -1, -2)
    k = W.shape[-1]
    np.testing.assert_allclose(
        np.swapaxes(W, -1, -2) @ W, np.broadcast_to(np.eye(k), W.shape[:-2] + (k, k)), atol=1e-12
    )
    # Moving the original keeps the weight orthogonal, and gradients reach it.
    # (Off the diagonal: householder keeps each column's sign there, and its gradient is 0.)
    orig = m.parametrizations.weight.original
    off_diagonal = 1 - fg.eye(shape[-2], shape[-1], dtype=fg.float64)
    with fg.no_grad():
        orig.add_(0.3 * fg.randn(*shape, dtype=fg.float64) * off_diagonal)
    W = m.weight.detach().numpy()
    if shape[-2] < shape[-1]:
        W = np.swapaxes(W, -1, -2)
    np.testing.assert_allclose(
        np.swapaxes(W, -1, -2) @ W, np.broadcast_to(np.eye(k), W.shape[:-2] + (k, k)), atol=1e-12
    )
    (m.weight * fg.randn(*shape, dtype=fg.float64)).sum().backward()
    assert float(orig.grad.abs().sum()) > 0


def test_orthogonal_keeps_an_orthogonal_weight_and_assignment():
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))
    m = nn.Module()
    m.weight = nn.Parameter(fg.tensor(Q))
    PZ.orthogonal(m)
    np.testing.assert_allclose(m.weight.detach().numpy(), Q, atol=1e-12)
    Q2, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((4, 4)))
    m.weight = fg.tensor(Q2)
    np.testing.assert_allclose(m.weight.detach().numpy(), Q2, atol=1e-12)


@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_gradcheck(omap):
    fg.manual_seed(8)
    orth = PZ._Orthogonal(fg.zeros(4, 3), PZ._OrthMaps[omap], use_trivialization=False)
    X = fg.randn(4, 3, dtype=fg.float64) * 0.5
    if omap == "householder":
        X = X + fg.eye(4, 3, dtype=fg.float64) * 3  # keep the sign-carrying diagonal away from 0
    assert gradcheck(orth, (X.requires_grad_(),))


def test_orthogonal_errors():
    m = nn.Module()
    m.v = nn.Parameter(fg.zeros(3))
    with pytest.raises(
        ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."
    ):
        PZ.orthogonal(m, "v")
    with pytest.raises(
        ValueError,
        match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: qr',
    ):
        PZ.orthogonal(linear64(), orthogonal_map="qr")
    m = PZ.orthogonal(linear64(), use_trivialization=False)
    with pytest.raises(
        NotImplementedError,
        match="It is not possible to assign to the matrix "
        "exponential or the Cayley parametrizations when use_trivialization=False.",
    ):
        m.weight = fg.eye(4, dtype=fg.float64)
    with pytest.raises(
        ValueError, match=re.escape("Expected a matrix or batch of matrices of shape ")
    ):
        PZ.orthogonal(linear64()).parametrizations.weight[0].right_inverse(fg.zeros(2, 2))


# ----- torch ---------------------------------------------------------------------------------


def _t(torch, a):
    return torch.tensor(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a))


def test_weight_norm_against_torch():
    torch = pytest.importorskip("torch")
    W = np.random.default_rng(1).standard_normal((4, 3, 2))
    x = np.random.default_rng(2).standard_normal((2, 3, 5))
    for dim in (0, 1, 2, None):
        fm = nn.Conv1d(3, 4, 2, bias=False, dtype=fg.float64)
        tm = torch.nn.Conv1d(3, 4, 2, bias=False, dtype=torch.float64)
        with fg.no_grad():
            fm.weight.copy_(fg.tensor(W))
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(W))
        PZ.weight_norm(fm, dim=dim)
        torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
        assert list(fm.state_dict()) == list(tm.state_dict())
        for k in fm.state_dict():
            np.testing.assert_allclose(fm.state_dict()[k].numpy(), tm.state_dict()[k].numpy())
        fy, ty = fm(fg.tensor(x)), tm(torch.tensor(x))
        np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
        fy.pow(2).sum().backward()
        ty.pow(2).sum().backward()
        for (n, p), (_, q) in zip(fm.named_parameters(), tm.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, err_msg=n)


def test_spectral_norm_against_torch():
    torch = pytest.importorskip("torch")
    W = np.random.default_rng(3).standard_normal((5, 3, 2, 2))
    x = np.random.default_rng(4).standard_normal((2, 3, 4, 4))
    fm = nn.Conv2d(3, 5, 2, bias=False, dtype=fg.float64)
    tm = torch.nn.Conv2d(3, 5, 2, bias=False, dtype=torch.float64)
    with fg.no_grad():
        fm.weight.copy_(fg.tensor(W))
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(W))
    PZ.spectral_norm(fm, n_power_iterations=2)
    torch.nn.utils.parametrizations.spectral_norm(tm, n_power_iterations=2)
    assert list(fm.state_dict()) == list(tm.state_dict())
    # The same starting vectors (the random draws differ).
    fsn, tsn = fm.parametrizations.weight[0], tm.parametrizations.weight[0]
    with fg.no_grad():
        fsn._u.copy_(fg.tensor(tsn._u.numpy()))
        fsn._v.copy_(fg.tensor(tsn._v.numpy()))
    for mode in ("train", "train", "eval"):
        getattr(fm, mode)()
        getattr(tm, mode)()
        fy, ty = fm(fg.tensor(x)), tm(torch.tensor(x))
        np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-10)
        np.testing.assert_allclose(fsn._u.numpy(), tsn._u.numpy(), rtol=1e-10)
        fy.pow(2).sum().backward()
        ty.pow(2).sum().backward()
        np.testing.assert_allclose(
            fm.parametrizations.weight.original.grad.numpy(),
            tm.parametrizations.weight.original.grad.numpy(),
            rtol=1e-8,
        )


def test_old_hooks_against_torch():
    torch = pytest.importorskip("torch")
    W = np.random.default_rng(5).standard_normal((4, 6))
    x = np.random.default_rng(6).standard_normal((3, 6))
    for kind in ("weight_norm", "spectral_norm"):
        fm = nn.Linear(6, 4, bias=False, dtype=fg.float64)
        tm = torch.nn.Linear(6, 4, bias=False, dtype=torch.float64)
        with fg.no_grad():
            fm.weight.copy_(fg.tensor(W))
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(W))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            getattr(nn.utils, kind)(fm)
            getattr(torch.nn.utils, kind)(tm)
        assert list(fm.state_dict()) == list(tm.state_dict())
        if kind == "spectral_norm":
            with fg.no_grad():
                fm.weight_u.copy_(fg.tensor(tm.weight_u.numpy()))
                fm.weight_v.copy_(fg.tensor(tm.weight_v.numpy()))
        for _ in range(2):
            fy, ty = fm(fg.tensor(x)), tm(torch.tensor(x))
            np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-10)
            fy.pow(2).sum().backward()
            ty.pow(2).sum().backward()
        for (n, p), (_, q) in zip(fm.named_parameters(), tm.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-8, err_msg=n)


@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_against_torch(omap):
    torch = pytest.importorskip("torch")
    X = np.random.default_rng(7).standard_normal((4, 4))
    G = np.random.default_rng(8).standard_normal((4, 4))
    fm = nn.Linear(4, 4, bias=False, dtype=fg.float64)
    tm = torch.nn.Linear(4, 4, bias=False, dtype=torch.float64)
    with fg.no_grad():
        fm.weight.copy_(fg.tensor(X))
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(X))
    PZ.orthogonal(fm, orthogonal_map=omap)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=omap)
    assert list(fm.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(fm.weight.detach().numpy(), tm.weight.detach().numpy(), atol=1e-12)
    # Move the originals the same way, then compare values and gradients.
    step = np.random.default_rng(9).standard_normal((4, 4)) * 0.2 * (1 - np.eye(4))
    with fg.no_grad():
        fm.parametrizations.weight.original.add_(fg.tensor(step))
    with torch.no_grad():
        tm.parametrizations.weight.original.add_(torch.tensor(step))
    np.testing.assert_allclose(fm.weight.detach().numpy(), tm.weight.detach().numpy(), atol=1e-12)
    (fm.weight * fg.tensor(G)).sum().backward()
    (tm.weight * torch.tensor(G)).sum().backward()
    np.testing.assert_allclose(
        fm.parametrizations.weight.original.grad.numpy(),
        tm.parametrizations.weight.original.grad.numpy(),
        atol=1e-10,
    )


def test_parametrize_errors_match_torch():
    torch = pytest.importorskip("torch")

    class TBad(torch.nn.Module):
        def forward(self, X):
            return X[:1]

    class FBad(nn.Module):
        def forward(self, X):
            return X[:1]

    with pytest.raises(ValueError) as f:
        P.register_parametrization(nn.Linear(3, 3), "weight", FBad())
    with pytest.raises(ValueError) as t:
        torch.nn.utils.parametrize.register_parametrization(torch.nn.Linear(3, 3), "weight", TBad())
    assert str(f.value).replace("ferrograd", "torch") == str(t.value)
    with pytest.raises(ValueError) as f:
        PZ.orthogonal(nn.Linear(3, 3), orthogonal_map="x")
    with pytest.raises(ValueError) as t:
        torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(3, 3), orthogonal_map="x")
    assert str(f.value) == str(t.value)
    with pytest.raises(IndexError) as f:
        PZ.spectral_norm(nn.Linear(3, 3), dim=-3)
    with pytest.raises(IndexError) as t:
        torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(3, 3), dim=-3)
    assert str(f.value) == str(t.value)
