"""Native distances, normalisation, prelu, one_hot and embedding_bag
(``ferrograd.nn.functional``, ``nn.CosineSimilarity``, ``nn.PairwiseDistance``,
``nn.EmbeddingBag``) against torch: values and gradients (first and second order) in float32 and
float64, broadcasting, zero vectors and zero differences (torch's gradient conventions there),
every embedding_bag mode with offsets, padding, per-sample weights and empty bags, module reprs,
and torch's error types and messages. Without torch only the closed-form checks run."""

from __future__ import annotations

import math

import ferrograd as fg
import ferrograd.nn as nn
import ferrograd.nn.functional as F
import numpy as np
import pytest


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


RNG = np.random.default_rng(7)
TOL = {"float64": (1e-10, 1e-12), "float32": (2e-5, 1e-6)}


def _pair(torch, a, requires_grad=True):
    a = np.asarray(a)
    x = fg.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
    t = torch.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
    return x, t


def _np(t):
    if type(t).__module__.startswith("torch"):
        return np.asarray(t.detach().numpy(force=True), dtype=np.float64)  # ZeroTensors too
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _close(a, b, dtype="float64"):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


class Const(np.ndarray):
    """An input array that gets no ``requires_grad``."""


def const(a):
    return np.asarray(a).view(Const)


def _check(torch, fn_fg, fn_t, arrays, dtype="float64", seed=0, create_graph=False):
    """Values and input gradients (for a random upstream gradient) of ``fn`` against torch;
    with ``create_graph`` also the gradient of ``Σ grads²`` (second order)."""
    fgs = [_pair(torch, np.asarray(a), not isinstance(a, Const)) for a in arrays]
    xs, ts = [p[0] for p in fgs], [p[1] for p in fgs]
    out, tout = fn_fg(*xs), fn_t(*ts)
    _close(out, tout, dtype)
    g = np.random.default_rng(seed).standard_normal(tuple(tout.shape)).astype(dtype)
    wants = [i for i, t in enumerate(ts) if t.requires_grad]
    gx = fg.autograd.grad(
        out, [xs[i] for i in wants], fg.tensor(g), create_graph=create_graph, allow_unused=True
    )
    gt = torch.autograd.grad(
        tout, [ts[i] for i in wants], torch.tensor(g), create_graph=create_graph, allow_unused=True
    )
    for a, b in zip(gx, gt):
        if b is None:
            assert a is None or float(a.abs().sum()) == 0.0
        else:
            _close(a, b, dtype)
    if create_graph:
        sx = sum((a * a).sum() for a in gx if a is not None)
        st = sum((b * b).sum() for b in gt if b is not None)
        hx = fg.autograd.grad(sx, [xs[i] for i in wants], allow_unused=True)
        ht = torch.autograd.grad(st, [ts[i] for i in wants], allow_unused=True)
        for a, b in zip(hx, ht):
            if b is None:
                assert a is None or float(a.abs().sum()) == 0.0
            else:
                _close(a, b, dtype)


def _raises(torch, fn, *args, **kwargs):
    """Same exception type and message from ferrograd and torch."""
    with pytest.raises(Exception) as t_err:
        fn(torch, *args, **kwargs)
    with pytest.raises(type(t_err.value)) as f_err:
        fn(fg, *args, **kwargs)
    tm = str(t_err.value).split("\n")[0].replace("torch.", "ferrograd.")
    assert str(f_err.value).split("\n")[0] == tm


def r(*shape, dtype="float64", low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


# ----- cosine_similarity ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "s1,s2,dim",
    [((4, 5), (4, 5), 1), ((4, 5), (4, 5), 0), ((2, 1, 5), (3, 5), -1), ((3, 4, 2), (4, 1), 1)],
)
def test_cosine_similarity_matches_torch(torch, dtype, s1, s2, dim):
    f = lambda L: lambda a, b: L.nn.functional.cosine_similarity(a, b, dim=dim)  # noqa: E731
    _check(torch, f(fg), f(torch), [r(*s1, dtype=dtype), r(*s2, dtype=dtype)], dtype)


def test_cosine_similarity_second_order_matches_torch(torch):
    f = lambda L: lambda a, b: L.nn.functional.cosine_similarity(a, b)  # noqa: E731
    _check(torch, f(fg), f(torch), [r(3, 4), r(3, 4)], create_graph=True)


def test_cosine_similarity_zero_and_tiny_vectors_match_torch(torch):
    a = r(4, 3)
    a[0] = 0.0
    a[1] = [1e-10, 0.0, 0.0]  # below eps: the norm is clamped, its gradient still flows
    b = r(4, 3)
    b[2] = 0.0
    f = lambda L: lambda x, y: L.nn.functional.cosine_similarity(x, y)  # noqa: E731
    _check(torch, f(fg), f(torch), [a, b])
    # Second order where a norm is below eps but not 0 (at 0 torch's is NaN; near 0 with a
    # tiny eps both are rounding noise on values of order 1/eps²).
    a[0], a[1] = [0.1, -0.2, 0.05], [0.3, 0.0, 0.1]
    b[2] = [0.0, 0.4, -0.1]
    g = lambda L: lambda x, y: L.nn.functional.cosine_similarity(x, y, eps=0.5)  # noqa: E731
    _check(torch, g(fg), g(torch), [a, b], create_graph=True)


def test_cosine_similarity_mixed_dtypes_match_torch(torch):
    a = r(3, 4, dtype="float32")
    b = np.arange(12).reshape(3, 4)
    out = F.cosine_similarity(fg.tensor(a), fg.tensor(b))
    ref = torch.nn.functional.cosine_similarity(torch.tensor(a), torch.tensor(b))
    assert out.dtype == fg.float32
    _close(out, ref, "float32")
    a64 = fg.tensor(r(3, 4), requires_grad=True)
    a32 = fg.tensor(r(3, 4, dtype="float32"), requires_grad=True)
    out = F.cosine_similarity(a64, a32)
    assert out.dtype == fg.float64
    out.sum().backward()
    assert a32.grad.dtype == fg.float32 and a64.grad.dtype == fg.float64


def test_cosine_similarity_closed_form():
    a = r(5, 6)
    b = r(5, 6)
    out = F.cosine_similarity(fg.tensor(a), fg.tensor(b)).numpy()
    ref = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    assert np.allclose(F.cosine_similarity(fg.tensor(a), fg.tensor(2.0 * a)).numpy(), 1.0)


def test_cosine_similarity_errors_match_torch(torch):
    def bad_shape(L):
        return L.nn.functional.cosine_similarity(L.ones(2, 3), L.ones(2, 4))

    def ints(L):
        return L.nn.functional.cosine_similarity(
            L.ones(2, 3, dtype=L.int64), L.ones(2, 3, dtype=L.int64)
        )

    def bad_dim(L):
        return L.nn.functional.cosine_similarity(L.ones(2, 3), L.ones(2, 3), dim=3)

    for fn in (bad_shape, ints, bad_dim):
        _raises(torch, fn)


# ----- pairwise_distance ------------------------------------------------------------------------

PS = [2.0, 1.0, 3.0, 0.5, 1.5, -1.0, 0.0, math.inf, -math.inf]


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pairwise_distance_matches_torch(torch, p, dtype):
    f = lambda L: lambda a, b: L.nn.functional.pairwise_distance(a, b, p=p)  # noqa: E731
    _check(torch, f(fg), f(torch), [r(4, 5, dtype=dtype), r(5, dtype=dtype)], dtype)


@pytest.mark.parametrize("p", PS)
def test_pairwise_distance_at_zero_difference_matches_torch(torch, p):
    # eps = 0 and equal rows: the norm and some differences are exactly 0, where torch's
    # gradient conventions (0 at a zero norm, 0 at a zero element for p < 1) apply.
    a = r(3, 4)
    b = a.copy()
    b[1, :2] += 1.0
    f = lambda L: lambda x, y: L.nn.functional.pairwise_distance(x, y, p=p, eps=0.0)  # noqa: E731
    _check(torch, f(fg), f(torch), [a, b])


@pytest.mark.parametrize("p", [2.0, 3.0, 0.5, 1.0])
def test_pairwise_distance_second_order_matches_torch(torch, p):
    f = lambda L: lambda a, b: L.nn.functional.pairwise_distance(a, b, p=p, keepdim=True)  # noqa: E731
    _check(torch, f(fg), f(torch), [r(3, 4), r(3, 4)], create_graph=True)


def test_pairwise_distance_shapes_match_torch(torch):
    for s1, s2, kd in [
        ((5,), (5,), False),
        ((5,), (5,), True),
        ((), (), False),
        ((2, 3), (3,), True),
    ]:
        a, b = r(*s1), r(*s2)
        out = F.pairwise_distance(fg.tensor(a), fg.tensor(b), keepdim=kd)
        ref = torch.nn.functional.pairwise_distance(torch.tensor(a), torch.tensor(b), keepdim=kd)
        assert tuple(out.shape) == tuple(ref.shape)
        _close(out, ref)


def test_pairwise_distance_closed_form():
    a, b = r(4, 6), r(4, 6)
    out = F.pairwise_distance(fg.tensor(a), fg.tensor(b), p=3.0).numpy()
    ref = (np.abs(a - b + 1e-6) ** 3).sum(1) ** (1 / 3)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_pairwise_distance_errors_match_torch(torch):
    _raises(torch, lambda L: L.nn.functional.pairwise_distance(L.ones(2, 3), L.ones(2, 4)))


# ----- normalize --------------------------------------------------------------------------------


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (0.5, 1), (math.inf, 2)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_normalize_matches_torch(torch, p, dim, dtype):
    f = lambda L: lambda x: L.nn.functional.normalize(x, p=p, dim=dim)  # noqa: E731
    _check(torch, f(fg), f(torch), [r(2, 3, 4, dtype=dtype)], dtype)


def test_normalize_zero_and_small_rows_match_torch(torch):
    x = r(4, 3)
    x[0] = 0.0
    x[2] = [1e-13, 0.0, -1e-13]
    f = lambda L: lambda t: L.nn.functional.normalize(t)  # noqa: E731
    _check(torch, f(fg), f(torch), [x])
    _check(torch, f(fg), f(torch), [x[1:]], create_graph=True)
    # At the zero row normalize is x / eps, linear: its second derivative is 0 (torch's NaN).
    xt = fg.tensor(x, requires_grad=True)
    (gx,) = fg.autograd.grad(F.normalize(xt)[0].sum(), [xt], create_graph=True)
    (h,) = fg.autograd.grad((gx * gx).sum(), [xt])
    np.testing.assert_allclose(gx.detach().numpy()[0], 1e12)
    assert np.all(h.numpy()[0] == 0.0)
    g = lambda L: lambda t: L.nn.functional.normalize(t, eps=2.0)  # noqa: E731
    _check(torch, g(fg), g(torch), [x[1:]], create_graph=True)


def test_normalize_is_one_node(torch):
    x = fg.tensor(r(2, 3), requires_grad=True)
    y = F.normalize(x)
    assert y.grad_fn.name() == "DivBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "torch::autograd::AccumulateGrad"


def test_normalize_errors_match_torch(torch):
    _raises(torch, lambda L: L.nn.functional.normalize(L.ones(2, 3), dim=4))
    _raises(torch, lambda L: L.nn.functional.normalize(L.ones(2, 3, dtype=L.int64)))


# ----- one_hot ----------------------------------------------------------------------------------


def test_one_hot_matches_closed_form():
    i = np.array([[0, 3], [2, 1]])
    out = F.one_hot(fg.tensor(i), 5)
    assert out.dtype == fg.int64
    np.testing.assert_array_equal(out.numpy(), np.eye(5, dtype=np.int64)[i])
    np.testing.assert_array_equal(F.one_hot(fg.tensor(i)).numpy(), np.eye(4, dtype=np.int64)[i])
    assert tuple(F.one_hot(fg.tensor(2)).shape) == (3,)
    assert tuple(F.one_hot(fg.tensor(np.zeros(0, dtype=np.int64)), 3).shape) == (0, 3)


def test_one_hot_errors_match_torch(torch):
    for fn in (
        lambda L: L.nn.functional.one_hot(L.ones(2, 3)),
        lambda L: L.nn.functional.one_hot(L.tensor([3]), 2),
        lambda L: L.nn.functional.one_hot(L.tensor([-1])),
        lambda L: L.nn.functional.one_hot(L.tensor([], dtype=L.int64)),
    ):
        _raises(torch, fn)


# ----- prelu ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "xs,ws", [((2, 3, 4, 5), (3,)), ((2, 3, 4), (1,)), ((5,), (1,)), ((4, 3), (3,)), ((), ())]
)
def test_prelu_matches_torch(torch, dtype, xs, ws):
    f = lambda L: L.nn.functional.prelu  # noqa: E731
    _check(torch, f(fg), f(torch), [r(*xs, dtype=dtype), r(*ws, dtype=dtype, low=0, high=1)], dtype)


def test_prelu_second_order_matches_torch(torch):
    f = lambda L: L.nn.functional.prelu  # noqa: E731
    _check(torch, f(fg), f(torch), [r(2, 3, 4), r(3, low=0, high=1)], create_graph=True)


def test_prelu_large_matches_closed_form():
    x, w = r(8, 16, 32, 32, dtype="float32"), r(16, dtype="float32")
    xt, wt = fg.tensor(x, requires_grad=True), fg.tensor(w, requires_grad=True)
    out = F.prelu(xt, wt)
    wb = w.reshape(16, 1, 1)
    np.testing.assert_allclose(out.detach().numpy(), np.where(x > 0, x, wb * x), rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), np.where(x > 0, 1.0, wb + 0 * x), rtol=1e-6)
    ref = np.where(x > 0, 0.0, x.astype(np.float64)).sum((0, 2, 3))
    np.testing.assert_allclose(wt.grad.numpy(), ref, rtol=1e-5)


def test_prelu_module_uses_native_kernel(torch):
    m = nn.PReLU(3)
    x = fg.tensor(r(2, 3, 4, dtype="float32"), requires_grad=True)
    assert m(x).grad_fn.name() == "PreluKernelBackward0"


def test_prelu_errors_match_torch(torch):
    for fn in (
        lambda L: L.nn.functional.prelu(L.ones(2, 3), L.ones(2)),
        lambda L: L.nn.functional.prelu(L.ones(()), L.ones(2)),
        lambda L: L.nn.functional.prelu(L.ones(2, 3), L.ones(3, 1)),
        lambda L: L.nn.functional.prelu(L.ones(2, 3, dtype=L.int64), L.ones(1)),
        lambda L: L.nn.functional.prelu(L.ones(2, 3, dtype=L.float64), L.ones(1)),
        lambda L: L.nn.functional.prelu(L.ones(2, 3, dtype=L.int64), L.ones(1, dtype=L.int64)),
    ):
        _raises(torch, fn)


# ----- embedding_bag ----------------------------------------------------------------------------

BAG_CASES = [
    dict(mode="mean"),
    dict(mode="sum"),
    dict(mode="max"),
    dict(mode="mean", padding_idx=2),
    dict(mode="sum", padding_idx=-1),
    dict(mode="max", padding_idx=0),
    dict(mode="sum", include_last_offset=True),
    dict(mode="mean", include_last_offset=True, padding_idx=3),
    dict(mode="mean", scale_grad_by_freq=True),
    dict(mode="sum", scale_grad_by_freq=True, padding_idx=1),
]


@pytest.mark.parametrize("kw", BAG_CASES, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_embedding_bag_offsets_match_torch(torch, kw, dtype):
    idx = np.array([0, 2, 1, 2, 4, 3, 2, 0, 0, 1])
    offsets = np.array([0, 3, 3, 7, 10])  # an empty bag in the middle and at the end

    def f(L):
        return lambda i, w: L.nn.functional.embedding_bag(i, w, L.tensor(offsets), **kw)

    _check(torch, f(fg), f(torch), [idx, r(5, 4, dtype=dtype)], dtype)


def _bag_reference(L, i, w, mode, p=None):
    """torch has no double backward for embedding_bag: the same bags composed of
    differentiable ops (embedding, then a sum, mean or max over each row of ``i``)."""
    e = L.nn.functional.embedding(i, w)
    if p is not None:
        e = e * p.unsqueeze(-1)
    if mode == "sum":
        return e.sum(1)
    if mode == "mean":
        return e.mean(1)
    return e.max(1).values


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_second_order_matches_torch_composition(torch, mode):
    idx = RNG.integers(0, 6, size=(4, 3))

    def f(L):
        if L is torch:
            return lambda i, w: _bag_reference(L, i, w, mode) * w.sum()
        return lambda i, w: L.nn.functional.embedding_bag(i, w, mode=mode) * w.sum()

    _check(torch, f(fg), f(torch), [idx, r(6, 3)], create_graph=True)


def test_embedding_bag_per_sample_weights_match_torch(torch):
    idx = np.array([0, 2, 1, 2, 4, 3, 2])
    offsets = np.array([0, 2, 2, 5])

    def f(L):
        return lambda i, w, p: L.nn.functional.embedding_bag(
            i, w, L.tensor(offsets), mode="sum", per_sample_weights=p, padding_idx=4
        )

    _check(torch, f(fg), f(torch), [idx, r(5, 3), r(7)])


def test_embedding_bag_per_sample_weights_second_order_matches_torch_composition(torch):
    idx = RNG.integers(0, 5, size=(3, 4))

    def f(L):
        if L is torch:
            return lambda i, w, p: _bag_reference(L, i, w, "sum", p) * (w.sum() + p.sum())
        return lambda i, w, p: (
            L.nn.functional.embedding_bag(i, w, mode="sum", per_sample_weights=p)
            * (w.sum() + p.sum())
        )

    _check(torch, f(fg), f(torch), [idx, r(5, 3), r(3, 4)], create_graph=True)


def test_embedding_bag_large_multithreaded_matches_closed_form():
    num, d, bags, per = 1000, 64, 512, 7
    w = r(num, d, dtype="float32")
    idx = RNG.integers(0, num, size=(bags, per))
    wt = fg.tensor(w, requires_grad=True)
    for mode, red in (("mean", np.mean), ("sum", np.sum), ("max", np.max)):
        out = F.embedding_bag(fg.tensor(idx), wt, mode=mode)
        np.testing.assert_allclose(out.detach().numpy(), red(w[idx], axis=1), rtol=1e-5, atol=1e-6)
    wt.grad = None
    F.embedding_bag(fg.tensor(idx), wt, mode="mean").sum().backward()
    ref = np.zeros((num, d))
    np.add.at(ref, idx.reshape(-1), 1.0 / per)
    np.testing.assert_allclose(wt.grad.numpy(), ref, rtol=1e-5)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_embedding_bag_max_norm_renormalises_like_torch(torch, norm_type):
    w = r(6, 3) * 3
    idx = np.array([[0, 1], [4, 4]])
    wf, wt = fg.tensor(w.copy()), torch.tensor(w.copy())
    out = F.embedding_bag(fg.tensor(idx), wf, max_norm=1.0, norm_type=norm_type)
    ref = torch.nn.functional.embedding_bag(
        torch.tensor(idx), wt, max_norm=1.0, norm_type=norm_type
    )
    _close(out, ref)
    _close(wf, wt)
    np.testing.assert_array_equal(wf.numpy()[[2, 3, 5]], w[[2, 3, 5]])  # unused rows untouched


def test_embedding_bag_module_matches_torch(torch):
    m = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=-2)
    tm = torch.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=-2)
    assert repr(m) == repr(tm)
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in tm.named_parameters()]
    assert float(m.weight[8].abs().sum()) == 0.0
    tm.load_state_dict({"weight": torch.tensor(m.weight.detach().numpy())})
    idx = np.array([1, 2, 8, 9, 1])
    off = np.array([0, 2])
    psw = r(5)
    out = m(fg.tensor(idx), fg.tensor(off), fg.tensor(psw))
    ref = tm(torch.tensor(idx), torch.tensor(off), torch.tensor(psw, dtype=torch.float32))
    _close(out, ref, "float32")
    for kw in ({}, {"max_norm": 2.0, "norm_type": 1.0, "scale_grad_by_freq": True}):
        assert repr(nn.EmbeddingBag(4, 2, **kw)) == repr(torch.nn.EmbeddingBag(4, 2, **kw))


def test_embedding_bag_default_init_is_standard_normal():
    w = nn.EmbeddingBag(200, 100).weight.detach().numpy()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1.0) < 0.02


def test_embedding_bag_from_pretrained_matches_torch(torch):
    w = r(4, 3, dtype="float32")
    m = nn.EmbeddingBag.from_pretrained(fg.tensor(w), mode="max")
    tm = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), mode="max")
    assert not m.weight.requires_grad and repr(m) == repr(tm)
    idx = np.array([[0, 3], [2, 2]])
    _close(m(fg.tensor(idx)), tm(torch.tensor(idx)), "float32")
    m2 = nn.EmbeddingBag.from_pretrained(fg.tensor(w), freeze=False)
    assert m2.weight.requires_grad


def test_embedding_bag_errors_match_torch(torch):
    w = np.ones((5, 3), dtype=np.float32)

    def call(*a, **k):
        def fn(L):
            args = [L.tensor(v) if isinstance(v, (list, np.ndarray)) else v for v in a]
            return L.nn.functional.embedding_bag(args[0], L.tensor(w), *args[1:], **k)

        return fn

    for fn in (
        call([1, 2, 3], [1, 2]),
        call([1, 2, 3], [0, 4]),
        call([1, 2, 7], [0, 2]),
        call([1, 2, -1], [0, 2]),
        call([1, 2, 3], [0, 2], padding_idx=5),
        call([1.0, 2.0, 3.0], [0, 2]),
        call([[1, 2]], [0]),
        call([1, 2]),
        call([[[1]]]),
        call([1, 2], [[0]]),
        call([1, 2], [0], mode="min"),
        call([1, 2], [0], mode="max", scale_grad_by_freq=True),
        call([1, 2], [0], mode="max", sparse=True),
        call([1, 2], [0], per_sample_weights=np.ones(2, dtype=np.float32)),
        call([1, 2], [0], mode="sum", per_sample_weights=np.ones(3, dtype=np.float32)),
    ):
        _raises(torch, fn)
    with pytest.raises(ValueError, match="weight has to be a 2D Tensor"):
        F.embedding_bag(fg.tensor([1]), fg.ones(3), fg.tensor([0]))


# ----- modules ----------------------------------------------------------------------------------


def test_distance_modules_match_torch(torch):
    a, b = r(4, 5), r(4, 5)
    for mk in (
        lambda L: L.nn.CosineSimilarity(),
        lambda L: L.nn.CosineSimilarity(dim=0, eps=1e-3),
        lambda L: L.nn.PairwiseDistance(),
        lambda L: L.nn.PairwiseDistance(p=1.0, keepdim=True),
    ):
        m, tm = mk(fg), mk(torch)
        assert repr(m) == repr(tm)
        _close(m(fg.tensor(a), fg.tensor(b)), tm(torch.tensor(a), torch.tensor(b)))
    assert nn.PairwiseDistance(p=3.0).norm == 3.0


# ----- margin and embedding losses --------------------------------------------------------------

REDUCTIONS = ["mean", "sum", "none"]


def _signs(*shape):
    return np.where(RNG.uniform(size=shape) < 0.5, -1.0, 1.0)


LOSSES = [
    (
        "cosine_embedding_loss",
        lambda: [r(4, 5), r(4, 5), _signs(4)],
        {"margin": 0.2},
    ),
    ("cosine_embedding_loss", lambda: [r(5), r(5), np.array(-1.0)], {"margin": -0.5}),
    ("margin_ranking_loss", lambda: [r(6), r(6), _signs(6)], {"margin": 0.3}),
    ("triplet_margin_loss", lambda: [r(4, 5), r(4, 5), r(4, 5)], {"margin": 2.0}),
    ("triplet_margin_loss", lambda: [r(4, 5), r(4, 5), r(4, 5)], {"p": 1.0, "swap": True}),
    ("hinge_embedding_loss", lambda: [r(3, 4), const(_signs(3, 4))], {"margin": 0.7}),
    ("soft_margin_loss", lambda: [r(3, 4), const(_signs(3, 4))], {}),
    (
        "multilabel_soft_margin_loss",
        lambda: [r(3, 4), RNG.integers(0, 2, size=(3, 4)).astype(np.float64)],
        {},
    ),
    ("poisson_nll_loss", lambda: [r(3, 4), r(3, 4, low=0.0, high=4.0)], {}),
    (
        "poisson_nll_loss",
        lambda: [r(3, 4, low=0.1, high=3.0), r(3, 4, low=0.0, high=4.0)],
        {"log_input": False, "full": True},
    ),
    ("gaussian_nll_loss", lambda: [r(3, 4), r(3, 4), r(3, 4, low=0.1, high=2.0)], {}),
    ("gaussian_nll_loss", lambda: [r(3, 4), r(3, 4), r(3, low=0.1, high=2.0)], {"full": True}),
    ("gaussian_nll_loss", lambda: [r(3, 4), r(3, 4), r(3, 1, low=0.1, high=2.0)], {}),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "name,make,kw", LOSSES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(LOSSES)]
)
def test_margin_losses_match_torch(torch, name, make, kw, reduction):
    arrays = make()

    def f(L):
        return lambda *a: getattr(L.nn.functional, name)(*a, reduction=reduction, **kw)

    _check(torch, f(fg), f(torch), arrays)
    if name != "hinge_embedding_loss":  # linear in its input: no second derivative
        _check(torch, f(fg), f(torch), arrays, create_graph=True)


def test_soft_margin_loss_target_gets_no_gradient_like_torch(torch):
    def fn(L):
        x = L.ones(2, requires_grad=True)
        return L.nn.functional.soft_margin_loss(x, L.ones(2, requires_grad=True))

    _raises(torch, fn)


def test_multilabel_soft_margin_loss_weight_matches_torch(torch):
    t = RNG.integers(0, 2, size=(3, 4)).astype(np.float64)

    def f(L):
        return lambda x, w: L.nn.functional.multilabel_soft_margin_loss(x, L.tensor(t), weight=w)

    _check(torch, f(fg), f(torch), [r(3, 4), r(4, low=0.1, high=2.0)], create_graph=True)


def test_gaussian_nll_loss_clamped_var_gradient_matches_torch(torch):
    v = r(3, 4, low=0.1, high=2.0)
    v[0, :2] = [1e-9, 0.0]  # below eps: clamped, the gradient still reaches var as torch's

    def f(L):
        return lambda x, y, var: L.nn.functional.gaussian_nll_loss(x, y, var)

    _check(torch, f(fg), f(torch), [r(3, 4), r(3, 4), v])


def test_margin_losses_closed_form():
    x1, x2 = r(4, 3), r(4, 3)
    y = np.array([1.0, -1.0, 1.0, -1.0])
    cos = (x1 * x2).sum(1) / np.sqrt(((x1 * x1).sum(1) + 1e-12) * ((x2 * x2).sum(1) + 1e-12))
    want = np.where(y == 1, 1 - cos, np.maximum(cos - 0.1, 0)).mean()
    got = F.cosine_embedding_loss(fg.tensor(x1), fg.tensor(x2), fg.tensor(y), margin=0.1)
    np.testing.assert_allclose(float(got), want, rtol=1e-12)
    a, p, n = r(4, 3), r(4, 3), r(4, 3)
    d = lambda u, v: np.sqrt(((u - v + 1e-6) ** 2).sum(1))  # noqa: E731
    want = np.maximum(1.0 + d(a, p) - d(a, n), 0).sum()
    got = F.triplet_margin_loss(fg.tensor(a), fg.tensor(p), fg.tensor(n), reduction="sum")
    np.testing.assert_allclose(float(got), want, rtol=1e-12)


def test_margin_loss_errors_match_torch(torch):
    for fn in (
        lambda L: L.nn.functional.cosine_embedding_loss(L.ones(2, 3), L.ones(2, 3), L.ones(2, 2)),
        lambda L: L.nn.functional.cosine_embedding_loss(L.ones(3), L.ones(3), L.ones(2)),
        lambda L: L.nn.functional.cosine_embedding_loss(L.ones(2, 3), L.ones(2, 3), L.tensor(1.0)),
        lambda L: L.nn.functional.margin_ranking_loss(L.ones(2), L.ones(2, 1), L.ones(2)),
        lambda L: L.nn.functional.triplet_margin_loss(L.ones(2, 3), L.ones(2, 3), L.ones(3)),
        lambda L: L.nn.functional.triplet_margin_loss(
            L.ones(2, 3), L.ones(2, 3), L.ones(2, 3), margin=0.0
        ),
        lambda L: L.nn.functional.soft_margin_loss(L.ones(2), L.ones(2), reduction="bad"),
        lambda L: L.nn.functional.multilabel_soft_margin_loss(
            L.ones(2, 3), L.ones(2, 3), reduction="bad"
        ),
        lambda L: L.nn.functional.poisson_nll_loss(L.ones(2), L.ones(2), reduction="bad"),
        lambda L: L.nn.functional.gaussian_nll_loss(L.ones(2, 3), L.ones(2, 3), L.ones(3, 2)),
        lambda L: L.nn.functional.gaussian_nll_loss(L.ones(2, 3), L.ones(2, 3), -1.0),
        lambda L: L.nn.functional.gaussian_nll_loss(L.ones(2, 3), L.ones(2, 3), -L.ones(2, 3)),
        lambda L: L.nn.TripletMarginLoss(margin=-1.0),
    ):
        _raises(torch, fn)


def test_margin_loss_modules_match_torch(torch):
    x1, x2, y = r(4, 5), r(4, 5), _signs(4)
    cases = [
        (lambda L: L.nn.CosineEmbeddingLoss(margin=0.1), [x1, x2, y]),
        (lambda L: L.nn.MarginRankingLoss(0.2, reduction="sum"), [x1[:, 0], x2[:, 0], y]),
        (lambda L: L.nn.TripletMarginLoss(p=3.0, swap=True), [x1, x2, r(4, 5)]),
        (lambda L: L.nn.HingeEmbeddingLoss(0.5), [x1, _signs(4, 5)]),
        (lambda L: L.nn.SoftMarginLoss(), [x1, _signs(4, 5)]),
        (lambda L: L.nn.MultiLabelSoftMarginLoss(), [x1, (x2 > 0).astype(np.float64)]),
        (lambda L: L.nn.PoissonNLLLoss(full=True), [x1, np.abs(x2) * 2]),
        (lambda L: L.nn.GaussianNLLLoss(eps=1e-3), [x1, x2, np.abs(r(4, 5))]),
    ]
    for mk, arrays in cases:
        m, tm = mk(fg), mk(torch)
        assert repr(m) == repr(tm)
        _close(m(*[fg.tensor(a) for a in arrays]), tm(*[torch.tensor(a) for a in arrays]))
    w = fg.tensor(r(5, low=0.1, high=1.0))
    m = nn.MultiLabelSoftMarginLoss(weight=w)
    assert [k for k, _ in m.named_buffers()] == ["weight"]
    with pytest.warns(UserWarning):
        assert nn.SoftMarginLoss(size_average=False).reduction == "sum"


# ----- cdist ------------------------------------------------------------------------------------

CDIST_PS = [2.0, 1.0, 3.0, 0.5, 0.0, math.inf]


@pytest.mark.parametrize("p", CDIST_PS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("s1,s2", [((4, 3), (5, 3)), ((2, 1, 4, 3), (3, 5, 3)), ((1, 6), (2, 6))])
def test_cdist_direct_matches_torch(torch, p, dtype, s1, s2):
    def f(L):
        return lambda a, b: L.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")

    _check(torch, f(fg), f(torch), [r(*s1, dtype=dtype), r(*s2, dtype=dtype)], dtype)


def test_cdist_zero_distances_and_ties_match_torch(torch):
    a = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    b = np.array([[1.0, -1.0, 0.0], [0.0, 0.0, 0.0], [3.0, 2.0, 1.0]])
    for p in CDIST_PS:

        def f(L, p=p):
            return lambda x, y: L.cdist(x, y, p=p)

        _check(torch, f(fg), f(torch), [a, b])


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
def test_cdist_second_order_matches_torch(torch, p):
    def f(L):
        return lambda a, b: L.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")

    _check(torch, f(fg), f(torch), [r(3, 4), r(2, 4)], create_graph=True)


@pytest.mark.parametrize("mode", [None, "use_mm_for_euclid_dist"])
def test_cdist_matrix_product_form_matches_torch(torch, mode):
    kw = {} if mode is None else {"compute_mode": mode}

    def f(L):
        return lambda a, b: L.cdist(a, b, **kw)

    _check(torch, f(fg), f(torch), [r(2, 30, 8), r(2, 27, 8)])
    _check(
        torch, f(fg), f(torch), [r(2, 30, 8, dtype="float32"), r(27, 8, dtype="float32")], "float32"
    )


def test_cdist_closed_form():
    a, b = r(5, 3), r(4, 3)
    ref = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        got = fg.cdist(fg.tensor(a), fg.tensor(b), compute_mode=mode).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-10)
    big_a, big_b = r(300, 16, dtype="float32"), r(200, 16, dtype="float32")
    got = fg.cdist(fg.tensor(big_a), fg.tensor(big_b), p=1.0).numpy()
    ref = np.abs(big_a[:, None, :].astype(np.float64) - big_b[None, :, :]).sum(-1)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_cdist_errors_match_torch(torch):
    for fn in (
        lambda L: L.cdist(L.ones(3), L.ones(3)),
        lambda L: L.cdist(L.ones(2, 3), L.ones(2, 4)),
        lambda L: L.cdist(L.ones(2, 3), L.ones(2, 3), p=-1.0),
        lambda L: L.cdist(L.ones(2, 3, dtype=L.int64), L.ones(2, 3, dtype=L.int64)),
        lambda L: L.cdist(L.ones(2, 3), L.ones(2, 3), compute_mode="x"),
        lambda L: L.cdist(L.ones(2, 2, 3), L.ones(3, 2, 3)),
        lambda L: L.cdist(L.ones(2, 3), L.ones(2, 3, dtype=L.float64)),
    ):
        _raises(torch, fn)


def test_top_level_distance_functions_match_torch(torch):
    a, b = r(3, 4), r(3, 4)
    _close(
        fg.cosine_similarity(fg.tensor(a), fg.tensor(b)),
        torch.cosine_similarity(torch.tensor(a), torch.tensor(b)),
    )
    _close(
        fg.pairwise_distance(fg.tensor(a), fg.tensor(b), p=1.0),
        torch.pairwise_distance(torch.tensor(a), torch.tensor(b), p=1.0),
    )


# ----- determinism ------------------------------------------------------------------------------


def _run_all(seed_arrays):
    a, b, w, idx, g = seed_arrays
    xa, xb = fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)
    tw = fg.tensor(w, requires_grad=True)
    outs = [
        F.cosine_similarity(xa, xb),
        F.normalize(xa, p=3.0),
        F.pairwise_distance(xa, xb),
        F.prelu(xa.reshape(64, 16, 64), tw[0, :16].contiguous()),
        F.embedding_bag(fg.tensor(idx), tw, mode="sum"),
        F.embedding_bag(fg.tensor(idx), tw, mode="max"),
        fg.cdist(xa[:200], xb[:300], p=1.5),
    ]
    loss = sum((o * o).sum() for o in outs)
    grads = fg.autograd.grad(loss, [xa, xb, tw])
    return [o.detach().numpy() for o in outs] + [gr.numpy() for gr in grads]


def test_results_are_bitwise_identical_at_any_thread_count():
    arrays = (
        r(1024, 64, dtype="float32"),
        r(1024, 64, dtype="float32"),
        r(500, 64, dtype="float32"),
        RNG.integers(0, 500, size=(1024, 20)),
        None,
    )
    before = fg.get_num_threads()
    try:
        fg.set_num_threads(1)
        one = _run_all(arrays)
        fg.set_num_threads(2)
        two = _run_all(arrays)
    finally:
        fg.set_num_threads(before)
    for x, y in zip(one, two):
        np.testing.assert_array_equal(x, y)
