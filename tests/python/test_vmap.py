"""``vmap``: in_dims/out_dims handling, composition with autograd (``vmap(grad)``,
``grad(vmap)``, nested vmap), and torch's errors; each result against an explicit loop over the
samples (the definition of vmap), closed forms, or torch.func when torch is installed."""

from __future__ import annotations

from typing import Any, Callable

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.func import grad, vmap

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def _rand(*shape: int, seed: int = 0) -> Any:
    return fg.tensor(np.random.default_rng(seed).standard_normal(shape))


def _loop(f: Callable[..., Any], *xs: Any) -> Any:
    return fg.stack([f(*[x[i] for x in xs]) for i in range(xs[0].shape[0])])


def _close(a: Any, b: Any, tol: float = 1e-12) -> None:
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def test_identity_over_each_in_dim_and_out_dim() -> None:
    x = _rand(2, 3, 4)
    for in_dim in (0, 1, 2, -1):
        for out_dim in (0, 1, -1):
            got = vmap(lambda t: t, in_dims=in_dim, out_dims=out_dim)(x)
            want = x.movedim(in_dim, out_dim)
            _close(got, want)


def test_shapes_inside_are_those_of_one_sample() -> None:
    seen = []

    def f(t: Any) -> Any:
        seen.append((tuple(t.shape), t.dim(), t.numel(), fg._C.is_batchedtensor(t)))
        return t

    vmap(f, in_dims=1)(_rand(5, 3, 2))
    assert seen == [((5, 2), 2, 10, True)]


def test_unbatched_output_is_expanded_and_none_out_dim_passes_it_through() -> None:
    c = _rand(3)
    got = vmap(lambda x: c * 2, in_dims=0)(_rand(4, 2))
    _close(got, (c * 2).expand(4, 3))
    got = vmap(lambda x: (x + 1, c), out_dims=(0, None))(_rand(4, 2))
    assert got[1] is c


def test_elementwise_reductions_views_and_products_match_a_loop() -> None:
    x, w, v = _rand(5, 3, 4), _rand(4, 2, seed=1), _rand(5, 4, seed=2)

    def f(a: Any, b: Any) -> Any:
        y = (a.sin() * 2 + b).relu() @ w  # (3, 2)
        z = y.t().reshape(6).softmax(0) + a.mean(0).sum()
        return fg.cat([z, a[1, 1:3], b.unsqueeze(0).sum(1)], 0).tanh()

    _close(vmap(f)(x, v), _loop(f, x, v))


def test_matmul_shapes_with_batched_and_unbatched_operands() -> None:
    cases = [((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5))]
    for sa, sb in cases:
        a, b = _rand(6, *sa), _rand(6, *sb, seed=1)
        _close(vmap(fg.matmul)(a, b), _loop(fg.matmul, a, b))
        b0, a0 = b[0], a[0]
        _close(vmap(fg.matmul, in_dims=(0, None))(a, b0), _loop(lambda p, q=b0: p @ q, a))
        _close(vmap(fg.matmul, in_dims=(None, 0))(a0, b), _loop(lambda q, p=a0: p @ q, b))


def test_linear_with_batched_input_and_batched_weights() -> None:
    x, w, b = _rand(4, 7, 3), _rand(4, 5, 3, seed=1), _rand(4, 5, seed=2)
    lin = fg.nn.functional.linear
    _close(vmap(lin)(x, w, b), _loop(lin, x, w, b))
    w0, b0 = w[0], b[0]
    _close(vmap(lin, in_dims=(0, None, None))(x, w0, b0), _loop(lambda p: lin(p, w0, b0), x))


def test_cross_entropy_per_sample_matches_a_loop() -> None:
    logits = _rand(4, 6, 5)
    target = fg.tensor(np.random.default_rng(3).integers(0, 5, size=(4, 6)))
    ce = fg.nn.functional.cross_entropy
    for kw in ({}, {"reduction": "sum"}, {"label_smoothing": 0.2}, {"ignore_index": 1}):
        f = lambda a, t, kw=kw: ce(a, t, **kw)  # noqa: E731
        _close(vmap(f)(logits, target), _loop(f, logits, target))
    wt = fg.tensor([1.0, 2.0, 0.5, 1.5, 3.0], dtype=fg.float64)
    f = lambda a, t: ce(a, t, weight=wt)  # noqa: E731
    _close(vmap(f)(logits, target), _loop(f, logits, target))
    bad = target.clone()
    bad[1, 2] = 9
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        vmap(ce)(logits, bad)


def test_nested_vmap_matches_a_double_loop() -> None:
    x, y = _rand(3, 4, 5), _rand(4, 5, seed=1)

    def f(a: Any, b: Any) -> Any:
        return (a * b).sum() + a.max()

    got = vmap(vmap(f, in_dims=(0, 0)), in_dims=(0, None))(x, y)
    want = fg.stack([fg.stack([f(x[i, j], y[j]) for j in range(4)]) for i in range(3)])
    _close(got, want)


def test_chunk_size_gives_the_same_result() -> None:
    x = _rand(7, 3)
    f = lambda t: (t * t).sum(0, keepdim=True)  # noqa: E731
    _close(vmap(f, chunk_size=3)(x), vmap(f)(x))
    _close(vmap(f, chunk_size=3, out_dims=1)(x), vmap(f, out_dims=1)(x))


def test_per_sample_gradients_of_an_mlp_match_a_loop() -> None:
    rng = np.random.default_rng(0)
    w1 = fg.tensor(rng.standard_normal((8, 5)) * 0.5)
    b1 = fg.tensor(rng.standard_normal(8))
    w2 = fg.tensor(rng.standard_normal((3, 8)) * 0.5)
    x = fg.tensor(rng.standard_normal((6, 5)))
    y = fg.tensor(rng.integers(0, 3, size=6))
    F = fg.nn.functional

    def loss(params: Any, xi: Any, yi: Any) -> Any:
        a, b, c = params
        h = F.linear(xi.unsqueeze(0), a, b).relu()
        return F.cross_entropy(F.linear(h, c), yi.unsqueeze(0))

    got = vmap(grad(loss), in_dims=(None, 0, 0))((w1, b1, w2), x, y)
    for i in range(6):
        ps = [p.detach().requires_grad_() for p in (w1, b1, w2)]
        want = fg.autograd.grad(loss(ps, x[i], y[i]), ps)
        for g, w in zip(got, want):
            _close(g[i], w)


def test_grad_of_vmap_differentiates_through_the_batch() -> None:
    x = _rand(4, 3).requires_grad_()
    w = _rand(3, seed=1).requires_grad_()
    out = vmap(lambda r: (r * w).sin().sum())(x)
    gx, gw = fg.autograd.grad((out * out).sum(), [x, w])
    # closed form: d/dx sum_i s_i^2 with s_i = sum_j sin(x_ij w_j)
    s = (x * w).sin().sum(1, keepdim=True)
    c = (x * w).cos()
    _close(gx, 2 * s * c * w)
    _close(gw, (2 * s * c * x).sum(0))


def test_vmap_of_grad_keeps_working_with_create_graph_for_second_order() -> None:
    x = _rand(5, 3)
    # per-sample Hessian diagonal of sum(x^3) is 6x
    hess_diag = vmap(grad(lambda t: grad(lambda u: (u**3).sum())(t).sum()))(x)
    _close(hess_diag, 6 * x)


def test_op_without_a_rule_raises_a_clear_error_and_leaves_inputs_intact() -> None:
    x = _rand(2, 3, 6)
    before = x.numpy().copy()
    with pytest.raises(RuntimeError, match="no batching rule"):
        vmap(lambda a: fg.bincount((a.abs() * 3).long().flatten()))(x)
    np.testing.assert_array_equal(x.numpy(), before)
    # the level was closed: vmap works again afterwards
    _close(vmap(lambda a: a + 1)(x), x + 1)


def test_data_dependent_python_access_inside_vmap_raises() -> None:
    with pytest.raises(RuntimeError):
        vmap(lambda t: t.sum().item())(_rand(3, 2))


def test_repr_shows_the_batched_tensor() -> None:
    seen = []
    vmap(lambda t: seen.append(repr(t)) or t)(_rand(2, 3))
    assert seen[0].startswith("BatchedTensor(lvl=") and "bdim=0" in seen[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda v, x: v(lambda t: t, in_dims=0)(),
        lambda v, x: v(lambda t: t, in_dims=[0])(x),
        lambda v, x: v(lambda t: t, in_dims=3)(x),
        lambda v, x: v(lambda t: t, in_dims=-4)(x),
        lambda v, x: v(lambda t, n: t, in_dims=(0, 0))(x, 3),
        lambda v, x: v(lambda t, s: t + s, in_dims=(0, 0))(x, x[:2]),
        lambda v, x: v(lambda t: t, in_dims=(0, 0))(x),
        lambda v, x: v(lambda t: t, in_dims=None)(x),
        lambda v, x: v(lambda t: t, in_dims=(1.5,))(x),
        lambda v, x: v(lambda t: t, out_dims=None)(x),
        lambda v, x: v(lambda t: 3.0)(x),
        lambda v, x: v(lambda t: (t, t), out_dims=(0, 0, 0))(x),
        lambda v, x: v(lambda t: t, out_dims="a")(x),
        lambda v, x: v(lambda t: t, randomness="sometimes")(x),
        lambda v, x: v(lambda t: t, chunk_size=0)(x),
    ],
)
def test_bad_arguments_raise_torchs_errors(call: Callable[..., Any]) -> None:
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    with pytest.raises(Exception) as ours:
        call(fg.vmap, fg.tensor(x))
    assert type(ours.value) in (ValueError, RuntimeError, IndexError)
    if torch is not None:
        with pytest.raises(Exception) as theirs:
            call(torch.vmap, torch.tensor(x))
        assert type(ours.value) is type(theirs.value)
        norm = lambda s: s.replace("ferrograd", "torch")  # noqa: E731
        assert norm(str(ours.value)) == norm(str(theirs.value))


@needs_torch
def test_per_sample_gradients_match_torch_func() -> None:
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((4, 3)), rng.standard_normal(4), rng.standard_normal((5, 3))]

    def make(lib: Any) -> Any:
        w, b, x = (lib.tensor(a) for a in arrays)

        def loss(w: Any, b: Any, xi: Any) -> Any:
            return (lib.tanh(xi @ w.t() + b) ** 2).mean()

        return lib.func.vmap(lib.func.grad(loss, argnums=(0, 1)), in_dims=(None, None, 0))(w, b, x)

    ours, theirs = make(fg), make(torch)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def test_randomness_error_same_and_different() -> None:
    x = fg.zeros(4, 3)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda t: t + fg.randn(3))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda t: fg.nn.functional.dropout(t + 1, 0.5))(x)
    same = vmap(lambda t: t + fg.randn(3), randomness="same")(x)
    assert (same == same[0]).all()
    fg.manual_seed(0)
    diff = vmap(lambda t: t + fg.rand(3), randomness="different")(x)
    assert tuple(diff.shape) == (4, 3)
    assert len({tuple(r) for r in diff.tolist()}) == 4
    assert 0.0 <= float(diff.min()) and float(diff.max()) < 1.0
    # the draws are those of rand(4, 3) from the same seed
    fg.manual_seed(0)
    _close(diff, fg.rand(4, 3))


def test_conv_and_pooling_per_sample_match_a_loop() -> None:
    F = fg.nn.functional
    x, w, b = _rand(3, 2, 1, 8, 8), _rand(4, 1, 3, 3, seed=1), _rand(4, seed=2)

    def f(a: Any, k: Any) -> Any:
        y = F.max_pool2d(F.conv2d(a, k, b, padding=1).relu(), 2)
        return F.avg_pool2d(y, 2).sum() + y.amax()

    _close(vmap(f, in_dims=(0, None))(x, w), _loop(lambda a: f(a, w), x))
    # per-sample gradients through conv and both poolings (the weight gradient per sample)
    got = vmap(grad(f, argnums=(0, 1)), in_dims=(0, None))(x, w)
    for i in range(3):
        xi, wi = x[i].detach().requires_grad_(), w.detach().requires_grad_()
        want = fg.autograd.grad(f(xi, wi), [xi, wi])
        _close(got[0][i], want[0])
        _close(got[1][i], want[1])


def test_custom_function_runs_per_sample_forward_and_backward() -> None:
    class Exp(fg.autograd.Function):
        @staticmethod
        def forward(ctx: Any, i: Any) -> Any:
            r = i.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (r,) = ctx.saved_tensors
            return g * r

    x = _rand(4, 3)
    _close(vmap(lambda t: Exp.apply(t).sum())(x), x.exp().sum(1))
    _close(vmap(grad(lambda t: Exp.apply(t).sum()))(x), x.exp())


def test_layer_norm_and_rms_norm_per_sample_match_a_loop() -> None:
    F = fg.nn.functional
    x, w, b = _rand(4, 5, 6), _rand(6, seed=1), _rand(6, seed=2)

    def f(a: Any, wt: Any) -> Any:
        return (F.layer_norm(a, (6,), wt, b).tanh() * F.rms_norm(a, (6,), wt)).sum()

    _close(vmap(f, in_dims=(0, None))(x, w), _loop(lambda a: f(a, w), x), 1e-10)
    got = vmap(grad(f, argnums=(0, 1)), in_dims=(0, None))(x, w)
    for i in range(4):
        xi, wi = x[i].detach().requires_grad_(), w.detach().requires_grad_()
        want = fg.autograd.grad(f(xi, wi), [xi, wi])
        _close(got[0][i], want[0], 1e-10)
        _close(got[1][i], want[1], 1e-10)


# ----- in-place ops inside vmap ----------------------------------------------------------------

_INPLACE_INTO_UNBATCHED = (
    "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor "
    "`other` in extra_args that has more elements than `self`. This happened due to `other` being "
    "vmapped over but `self` not being vmapped over in a vmap. Please try to use out-of-place "
    "operators instead of inplace arithmetic. If said operator is being called inside the "
    "PyTorch framework, please file a bug report instead."
)


def _inplace_cases(lib: Any) -> dict:
    """name -> (function writing into its first input in place and returning it, in_dims)."""
    w = lib.tensor(np.linspace(-1.0, 1.0, 3))
    return {
        "abs_": (lambda a: a.abs_(), (0,)),
        "add_batched": (lambda a, b: a.add_(b * 2.0), (0, 0)),
        "mul_unbatched": (lambda a: a.mul_(w), (0,)),
        "addcmul_batch_dim_1": (lambda a, b: a.addcmul_(b, w, value=0.5), (1, 0)),
        "clamp_tensor": (lambda a, b: a.clamp_(min=b), (0, 0)),
        "lerp_shared_end": (lambda a, b: a.lerp_(b, 0.25), (0, None)),
        "view_fill_": (lambda a: a[1:].fill_(7.0) is not None and a, (0,)),
        "setitem": (lambda a, b: a.__setitem__(0, b[2]) or a, (0, 0)),
        "index_add_": (lambda a, b: a.index_add_(0, lib.tensor([2, 0]), b[:2]), (1, 1)),
    }


@pytest.mark.parametrize("name", sorted(_inplace_cases(fg)))
def test_in_place_ops_write_into_each_sample_of_the_batched_tensor(name: str) -> None:
    f, dims = _inplace_cases(fg)[name]
    stacked = [np.random.default_rng(k).standard_normal((4, 3)) for k in range(len(dims))]
    # the definition: the op on a copy of each sample, the results stacked
    want = fg.stack(
        [
            f(*[fg.tensor(a[i if d is not None else 0]) for a, d in zip(stacked, dims)])
            for i in range(4)
        ]
    )
    inputs = [
        fg.tensor(a[0]) if d is None else fg.tensor(a).movedim(0, d).contiguous()
        for a, d in zip(stacked, dims)
    ]
    before = [a.numpy().copy() for a in inputs]
    version = inputs[0]._version
    out = vmap(f, in_dims=dims)(*inputs)
    _close(out, want)
    # the batched input's own memory holds the written samples
    _close(inputs[0].movedim(dims[0], 0), want)
    assert inputs[0]._version > version
    if torch is not None:
        theirs = [torch.tensor(a) for a in before]
        t_out = torch.vmap(_inplace_cases(torch)[name][0], in_dims=dims)(*theirs)
        _close(out, fg.tensor(t_out.numpy()))
        _close(inputs[0], fg.tensor(theirs[0].numpy()))


@pytest.mark.parametrize(
    "write",
    [
        lambda lib, y, b: y.mul_(b),
        lambda lib, y, b: y.copy_(b),
        lambda lib, y, b: y.masked_fill_(b > 0, 1.0),
        lambda lib, y, b: y.clamp_min_(b),
        lambda lib, y, b: y.__setitem__(slice(None), b),
    ],
)
def test_batched_values_into_an_unbatched_tensor_raise_torchs_error(write: Any) -> None:
    x, y0 = np.random.default_rng(0).standard_normal((4, 3)), np.linspace(0.0, 1.0, 3)
    y = fg.tensor(y0)
    with pytest.raises(RuntimeError) as ours:
        vmap(lambda b: write(fg, y, b))(fg.tensor(x))
    assert str(ours.value) == _INPLACE_INTO_UNBATCHED
    # nothing was written
    np.testing.assert_array_equal(y.numpy(), y0)
    if torch is not None:
        with pytest.raises(RuntimeError) as theirs:
            torch.vmap(lambda b: write(torch, torch.tensor(y0), b))(torch.tensor(x))
        assert str(theirs.value) == str(ours.value)


def test_nested_vmap_writes_need_every_level_of_the_values() -> None:
    a, c = _rand(2, 4, 3), _rand(2, 3, seed=1)
    # the target is batched at both levels, the values at the outer one only: fine
    target = a.clone()
    got = vmap(lambda t, v: vmap(lambda s: s.add_(v))(t))(target, c)
    _close(got, a + c.unsqueeze(1))
    _close(target, a + c.unsqueeze(1))
    # the target is batched at the inner level only, the values at the outer one: refused
    with pytest.raises(RuntimeError) as ours:
        vmap(lambda v: vmap(lambda s: s.add_(v))(a[0].clone()))(c)
    assert str(ours.value) == _INPLACE_INTO_UNBATCHED


def test_unbatched_values_into_an_unbatched_tensor_inside_vmap_happen_once() -> None:
    counter = fg.zeros(3)
    out = vmap(lambda b: counter.add_(1.0) * b)(_rand(4, 3))
    _close(counter, fg.ones(3))
    assert tuple(out.shape) == (4, 3)


def test_random_in_place_with_different_randomness_needs_a_batched_target() -> None:
    y = fg.zeros(3)
    with pytest.raises(RuntimeError, match="Cannot ask for different inplace randomness"):
        vmap(lambda b: y.normal_(), randomness="different")(_rand(4, 3))
    fg.manual_seed(0)
    z = fg.zeros(4, 3)
    vmap(lambda b: b.normal_(), randomness="different")(z)
    assert len({tuple(r) for r in z.tolist()}) == 4


def test_gradients_flow_through_in_place_ops_inside_vmap() -> None:
    x = _rand(5, 3)
    # per sample: d/dx sum(x * x written in place, then its sine in place) = 2x cos(x^2)
    got = vmap(grad(lambda t: t.clone().mul_(t).sin_().sum()))(x)
    _close(got, 2 * x * fg.cos(x * x))

    # writing through a view of the batched tensor: the view's region gets the new gradient
    def f(t: Any) -> Any:
        u = t.clone()
        u[1:].mul_(3.0)
        return (u * u).sum()

    scale = fg.tensor([1.0, 9.0, 9.0], dtype=fg.float64)
    _close(vmap(grad(f))(x), 2 * x * scale)


def test_sorting_under_nested_vmap_and_its_gradient_match_a_loop() -> None:
    x = _rand(2, 3, 5)

    def f(t: Any) -> Any:
        v, i = t.sort(descending=True)
        return (v * fg.arange(5, dtype=fg.float64)).sum() + t.topk(2).values.sum() + i.sum()

    got = vmap(vmap(grad(f)))(x)
    want = fg.stack([fg.stack([grad(f)(x[a, b]) for b in range(3)]) for a in range(2)])
    _close(got, want)
    vals = vmap(vmap(lambda t: t.cummin(0).values))(x)
    rows = [fg.stack([x[a, b].cummin(0).values for b in range(3)]) for a in range(2)]
    _close(vals, fg.stack(rows))


def test_integer_checks_read_every_sample() -> None:
    a = fg.arange(6).reshape(2, 3)
    divisors = fg.tensor([[1, 2, 3], [4, 0, 6]])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        vmap(lambda x, y: x // y)(a, divisors)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        vmap(lambda x, y: x.pow(y))(a, -divisors)
    _close(vmap(lambda x, y: x.remainder(y))(a, divisors + 1), a.remainder(divisors + 1))


def test_cosine_similarity_under_nested_vmap_with_a_shared_operand() -> None:
    F = fg.nn.functional
    x, y = _rand(2, 3, 4, 5), _rand(4, 5, seed=1)
    got = vmap(vmap(lambda a: F.cosine_similarity(a, y, dim=0)))(x)
    _close(got, F.cosine_similarity(x, y, dim=2))

    def loss(a: Any) -> Any:
        return F.cosine_similarity(a, y, dim=-1).sum()

    _close(vmap(grad(loss))(x[0]), _loop(grad(loss), x[0]))


# ----- batching rules of the linalg, nn and index families --------------------------------------
# Each family's ops under vmap and vmap(grad) against the per-sample loop, and torch.vmap when
# torch is installed (the same function on torch's module).


def _spd(L: Any, a: Any) -> Any:
    return a @ a.mT + L.eye(a.shape[-1], dtype=a.dtype)


FAMILIES = {
    "inv_det_slogdet": (
        lambda L, a: L.linalg.inv(_spd(L, a)) * L.linalg.det(a) + L.linalg.slogdet(a)[1],
        [(4, 3, 3)],
    ),
    "cholesky_solve": (
        lambda L, a, b: L.linalg.solve(_spd(L, a), b) + L.linalg.cholesky(_spd(L, a)) @ b,
        [(4, 3, 3), (4, 3, 2)],
    ),
    "svdvals_pinv": (
        lambda L, a: L.linalg.pinv(a).sum(-1) + L.linalg.svdvals(a).sum() * 0.5,
        [(4, 3, 2)],
    ),
    "pad_shuffle": (
        lambda L, x: L.nn.functional.pixel_shuffle(
            L.nn.functional.pad(x, (1, 2, 0, 1), mode="reflect"), 2
        ),
        [(3, 8, 3, 4)],
    ),
    "norms": (
        lambda L, x, w: (
            L.nn.functional.group_norm(x, 2, w)
            + L.nn.functional.batch_norm(x, None, None, w, training=True)
            + L.nn.functional.instance_norm(x, weight=w)
        ),
        [(3, 2, 4, 5), (3, 4)],
    ),
    "sdpa": (
        lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        [(3, 2, 4, 5), (3, 2, 4, 5), (3, 2, 4, 3)],
    ),
    "interpolate": (
        lambda L, x: L.nn.functional.interpolate(
            x, scale_factor=2, mode="bilinear", align_corners=False
        ),
        [(3, 2, 2, 3, 4)],
    ),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_batches_like_a_loop_and_like_torch(name: str) -> None:
    f, shapes = FAMILIES[name]
    xs = [_rand(*s, seed=k) for k, s in enumerate(shapes)]
    _close(vmap(lambda *a: f(fg, *a))(*xs), _loop(lambda *a: f(fg, *a), *xs), 1e-10)

    def loss(*a: Any) -> Any:
        return (f(fg, *a) ** 2).sum()

    got = vmap(grad(loss))(*xs)
    want = _loop(lambda *a: fg.autograd.grad(loss(a[0].requires_grad_(), *a[1:]), a[0])[0], *xs)
    _close(got, want, 1e-9)
    if torch is not None:
        ts = [torch.tensor(x.numpy()) for x in xs]
        theirs = torch.vmap(lambda *a: f(torch, *a))(*ts)
        np.testing.assert_allclose(vmap(lambda *a: f(fg, *a))(*xs).numpy(), theirs, 1e-9, 1e-9)
        tgrad = torch.vmap(torch.func.grad(lambda *a: (f(torch, *a) ** 2).sum()))(*ts)
        np.testing.assert_allclose(got.numpy(), tgrad, 1e-9, 1e-9)


def test_embedding_with_per_sample_indices_gives_per_sample_weight_gradients() -> None:
    rng = np.random.default_rng(3)
    idx = fg.tensor(rng.integers(0, 5, size=(3, 4)))
    w = _rand(3, 5, 2, seed=4)
    F = fg.nn.functional

    def loss(w1: Any, i: Any) -> Any:
        return (F.embedding(i, w1, padding_idx=1, scale_grad_by_freq=True) ** 2).sum()

    got = vmap(grad(loss))(w, idx)
    want = _loop(lambda w1, i: fg.autograd.grad(loss(w1.requires_grad_(), i), w1)[0], w, idx)
    _close(got, want)
    _close(vmap(lambda i: F.one_hot(i, 5))(idx), F.one_hot(idx, 5))
    with pytest.raises(RuntimeError, match="explicit positive num_classes"):
        vmap(lambda i: F.one_hot(i))(idx)
    if torch is not None:
        tw, ti = torch.tensor(w.numpy()), torch.tensor(idx.numpy())
        theirs = torch.vmap(
            torch.func.grad(
                lambda w1, i: (
                    torch.nn.functional.embedding(i, w1, padding_idx=1, scale_grad_by_freq=True)
                    ** 2
                ).sum()
            )
        )(tw, ti)
        np.testing.assert_allclose(got.numpy(), theirs, 1e-12, 1e-12)


def test_running_statistics_under_vmap_follow_torchs_rule() -> None:
    x = _rand(3, 4, 2, 5)
    F = fg.nn.functional
    rm, rv = fg.zeros(3, 2, dtype=fg.float64), fg.ones(3, 2, dtype=fg.float64)
    out = vmap(lambda a, m, v: F.batch_norm(a, m, v, training=True, momentum=0.3))(x, rm, rv)
    for b in range(3):
        m1, v1 = fg.zeros(2, dtype=fg.float64), fg.ones(2, dtype=fg.float64)
        _close(out[b], F.batch_norm(x[b], m1, v1, training=True, momentum=0.3))
        _close(rm[b], m1)
        _close(rv[b], v1)
    shared = fg.zeros(2, dtype=fg.float64), fg.ones(2, dtype=fg.float64)
    with pytest.raises(RuntimeError, match="were not batched"):
        vmap(lambda a: F.batch_norm(a, *shared, training=True))(x)
    # eval mode only reads them
    _close(
        vmap(lambda a: F.batch_norm(a, *shared, training=False))(x),
        F.batch_norm(x.flatten(0, 1), *shared, training=False).reshape(3, 4, 2, 5),
    )


def test_data_dependent_shapes_raise_torchs_errors() -> None:
    x = _rand(3, 4)
    with pytest.raises(RuntimeError, match="can output dynamic shape"):
        vmap(lambda a: a.nonzero())(x)
    counts = fg.tensor([[1, 2], [2, 1]])
    with pytest.raises(RuntimeError, match="requires the `output_size` argument"):
        vmap(lambda r: fg.repeat_interleave(r))(counts)
    got = vmap(lambda r: fg.repeat_interleave(r, output_size=3))(counts)
    np.testing.assert_array_equal(got.numpy(), [[0, 1, 1], [0, 0, 1]])


def test_searches_and_histograms_batch_like_a_loop() -> None:
    x = fg.tensor(np.random.default_rng(5).uniform(size=(3, 2, 6)))
    seq = fg.sort(fg.tensor(np.random.default_rng(6).uniform(size=(3, 2, 5)))).values
    shared = fg.tensor([0.1, 0.5, 0.9], dtype=fg.float64)
    cases = [
        (lambda v: fg.searchsorted(shared, v, right=True), (x,)),
        (lambda s, v: fg.searchsorted(s, v), (seq, x)),
        (lambda s, v: fg.searchsorted(s[0], v), (seq, x)),
        (lambda v: fg.bucketize(v, shared), (x,)),
        (lambda v: fg.histc(v, 4), (x,)),
    ]
    for f, args in cases:
        np.testing.assert_array_equal(vmap(f)(*args).numpy(), _loop(f, *args).numpy())
    for op in ("unique", "unique_consecutive"):
        with pytest.raises(RuntimeError, match=f"Attempted to vmap over aten::_?{op[:6]}"):
            vmap(getattr(fg, op))(x)


_F32_OPS: dict = {
    "gelu": lambda t: fg.nn.functional.gelu(t),
    "gelu_tanh": lambda t: fg.nn.functional.gelu(t, approximate="tanh"),
    "silu": lambda t: fg.nn.functional.silu(t),
    "mish": lambda t: fg.nn.functional.mish(t),
    "elu": lambda t: fg.nn.functional.elu(t, 0.7),
    "selu": lambda t: fg.nn.functional.selu(t),
    "celu": lambda t: fg.nn.functional.celu(t, 1.3),
    "softplus": lambda t: fg.nn.functional.softplus(t, beta=2.0),
    "hardswish": lambda t: fg.nn.functional.hardswish(t),
    "hardsigmoid": lambda t: fg.nn.functional.hardsigmoid(t),
    "relu6": lambda t: fg.nn.functional.relu6(t * 4),
    "leaky_relu": lambda t: fg.nn.functional.leaky_relu(t, 0.1),
    "logsigmoid": lambda t: fg.nn.functional.logsigmoid(t),
    "hardtanh": lambda t: fg.nn.functional.hardtanh(t, -0.5, 0.5),
    "softshrink": lambda t: fg.nn.functional.softshrink(t, 0.3),
    "glu": lambda t: fg.nn.functional.glu(t, -1),
    "bce_with_logits": lambda t: fg.nn.functional.binary_cross_entropy_with_logits(
        t, (t.detach() > 0).float()
    ),
    "tanh_sigmoid": lambda t: t.tanh() * t.sigmoid(),
    "softmax": lambda t: fg.nn.functional.softmax(t, -1),
    "layer_norm": lambda t: fg.nn.functional.layer_norm(t, (6,)),
}


@pytest.mark.parametrize("name", sorted(_F32_OPS))
def test_float32_fused_kernels_under_vmap_match_a_loop(name: str) -> None:
    # The float32 kernels read elements (a batched tensor has none of its own): under vmap
    # they run on the physical tensor, or compose, and must equal the op sample by sample;
    # so must per-sample gradients, and jacrev's batched cotangents through the backward.
    f = _F32_OPS[name]
    xs = fg.tensor(np.random.default_rng(1).standard_normal((3, 4, 6)).astype(np.float32))
    w = fg.tensor(np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32))

    def loss(t: Any) -> Any:
        y = f(t)
        return (y * w[..., : y.shape[-1]]).sum() if y.dim() else y

    _close(vmap(f)(xs), _loop(f, xs), 1e-6)
    per_sample = vmap(grad(loss))(xs)
    leaves = [xs[i].detach().requires_grad_() for i in range(3)]
    want = fg.stack([fg.autograd.grad(loss(xi), xi)[0] for xi in leaves])
    _close(per_sample, want, 1e-6)
    x0 = xs[0].detach().requires_grad_()
    y0 = f(x0)
    rows = [
        fg.autograd.grad(y0.reshape(-1)[k], x0, retain_graph=True, allow_unused=True)[0]
        for k in range(y0.numel())
    ]
    want_jac = fg.stack([r if r is not None else fg.zeros_like(x0) for r in rows])
    _close(fg.func.jacrev(f)(xs[0]).reshape(want_jac.shape), want_jac, 1e-6)
