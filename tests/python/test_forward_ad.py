"""``autograd.forward_ad``: dual levels, make_dual/unpack_dual, tangents through ops (every op of
the op table is checked against finite differences in ``test_op_table.py``), in-place ops and
views, custom Function ``jvp``, forward-over-reverse, and torch's errors. Values are checked
against closed forms; the torch section compares the same programs when torch is installed."""

import math

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.autograd import forward_ad as fwAD


def _t(v):
    return fg.tensor(np.asarray(v, dtype=np.float64))


def test_tangent_of_a_composition_is_the_chain_rule():
    x = _t([0.3, -1.2, 2.0])
    v = _t([1.0, 2.0, -1.0])
    with fwAD.dual_level():
        y = fwAD.make_dual(x, v).sin().exp()
        p, t = fwAD.unpack_dual(y)
    xs, vs = x.tolist(), v.tolist()
    # d/dx e^{sin x} = cos x e^{sin x}
    assert p.tolist() == pytest.approx([math.exp(math.sin(a)) for a in xs])
    assert t.tolist() == pytest.approx(
        [math.cos(a) * math.exp(math.sin(a)) * b for a, b in zip(xs, vs)]
    )


def test_matmul_tangent_is_linear_in_both_operands():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    va, vb = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    with fwAD.dual_level():
        y = fwAD.make_dual(_t(a), _t(va)) @ fwAD.make_dual(_t(b), _t(vb))
        t = fwAD.unpack_dual(y).tangent.numpy()
    assert np.allclose(t, va @ b + a @ vb)


def test_forward_mode_ignores_no_grad_and_needs_no_requires_grad():
    x = _t([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, _t([1.0, 1.0]))
        assert not d.requires_grad
        with fg.no_grad():
            y = d * d
        assert not y.requires_grad and y.grad_fn is None
        assert fwAD.unpack_dual(y).tangent.tolist() == [2.0, 4.0]


def test_tensors_without_tangent_and_outside_a_level():
    x = _t([1.0, 2.0])
    assert fwAD.unpack_dual(x).tangent is None
    with fwAD.dual_level():
        assert fwAD.unpack_dual(x).tangent is None
        d = fwAD.make_dual(x, _t([3.0, 4.0]))
        p, t = fwAD.unpack_dual(d)
        assert fwAD.unpack_dual(p).tangent is None and t.tolist() == [3.0, 4.0]
        idx = d.argmax()
        assert fwAD.unpack_dual(idx).tangent is None
    # Leaving the level drops every tangent.
    assert fwAD.unpack_dual(d).tangent is None


def test_in_place_ops_and_writes_through_views_update_tangents():
    with fwAD.dual_level():
        d = fwAD.make_dual(_t([1.0, 2.0, 3.0]), _t([1.0, 1.0, 1.0]))
        d.mul_(2)
        assert fwAD.unpack_dual(d).tangent.tolist() == [2.0, 2.0, 2.0]
        base = fwAD.make_dual(_t([1.0, 2.0, 3.0, 4.0]), _t([1.0, 1.0, 1.0, 1.0]))
        base = base * 1
        base[1:3] = fwAD.make_dual(_t([5.0, 6.0]), _t([7.0, 8.0]))
        assert fwAD.unpack_dual(base).tangent.tolist() == [1.0, 7.0, 8.0, 1.0]
        base.zero_()
        assert fwAD.unpack_dual(base).tangent.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_forward_over_reverse_gives_hessian_vector_products():
    w = _t([-0.5, 0.1, 0.7]).requires_grad_()
    u = _t([1.0, 0.0, -2.0])
    with fwAD.dual_level():
        wd = fwAD.make_dual(w, u)
        loss = (wd.sin() * wd).sum()
        (g,) = fg.autograd.grad(loss, wd, create_graph=True)
        hvp = fwAD.unpack_dual(g).tangent
    # f = x sin x: f'' = 2 cos x - x sin x (diagonal Hessian)
    expect = [(2 * math.cos(a) - a * math.sin(a)) * b for a, b in zip(w.tolist(), u.tolist())]
    assert hvp.tolist() == pytest.approx(expect)


def test_reverse_through_a_dual_tensor():
    x = _t([0.5, 1.5]).requires_grad_()
    with fwAD.dual_level():
        d = fwAD.make_dual(x, _t([1.0, 1.0]))
        assert d.requires_grad
        (d.exp()).sum().backward()
    assert x.grad.tolist() == pytest.approx([math.exp(0.5), math.exp(1.5)])


class _Cube(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * t * 10  # deliberately not the derivative: the rule used is this one


def test_custom_function_jvp_is_used_and_required():
    with fwAD.dual_level():
        y = _Cube.apply(fwAD.make_dual(_t([1.0, 2.0]), _t([1.0, 1.0])))
        assert fwAD.unpack_dual(y).tangent.tolist() == [30.0, 120.0]

        class NoJvp(fg.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
            NoJvp.apply(fwAD.make_dual(_t([1.0]), _t([1.0])))
        # Without tangents the Function runs as usual.
        assert NoJvp.apply(_t([1.0])).tolist() == [2.0]


def test_errors():
    x = _t([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(x, x)
    with pytest.raises(RuntimeError, match="Dual level must be a positive number."):
        fwAD.exit_dual_level()
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            fwAD.enter_dual_level()
        with pytest.raises(RuntimeError, match="different size than that of the original Tensor"):
            fwAD.make_dual(x, _t([1.0, 2.0]))
        with pytest.raises(ValueError, match="Expected primal to be floating point or complex"):
            fwAD.make_dual(fg.tensor([1, 2]), fg.tensor([1, 2]))
        d = fwAD.make_dual(x, x)
        with pytest.raises(RuntimeError, match="already has a forward gradient at the same level"):
            fwAD.make_dual(d, x)
        with pytest.raises(RuntimeError, match="Invalid level given to _fw_primal"):
            fwAD.unpack_dual(d, level=5)
    level = fwAD.enter_dual_level()
    assert level == 0
    fwAD.exit_dual_level(level=level)


def _observe(torch):
    f = torch.autograd.forward_ad
    out = []
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.standard_normal((2, 3)))
    v = torch.tensor(rng.standard_normal((2, 3)))
    w = torch.tensor(rng.standard_normal((3, 4)))
    with f.dual_level() as level:
        out.append(level)
        d = f.make_dual(x, v)
        y = torch.nn.functional.gelu(d @ w).softmax(-1).log().mean(0)
        out.append(np.round(f.unpack_dual(y).tangent.numpy(), 10).tolist())
        out.append(type(f.unpack_dual(y)).__name__)
        m = d.clone()
        m[0] = 0.0
        out.append(np.round(f.unpack_dual(m).tangent.numpy(), 10).tolist())
    for fn in (lambda: f.make_dual(x, v), lambda: f.exit_dual_level()):
        try:
            fn()
        except RuntimeError as e:
            out.append(str(e))
    return out


def test_same_as_torch():
    torch = pytest.importorskip("torch")
    assert _observe(fg) == _observe(torch)


@pytest.mark.parametrize("create_graph", [False, True])
def test_forward_over_reverse_through_saved_outputs_matches_differences(create_graph):
    # tanh, exp, sigmoid and softmax save their outputs; the hvp must see the outputs' tangents.
    def loss(x):
        return (x.tanh() * x.exp()).sum() + x.sigmoid().sum() + fg.softmax(x, 0)[0]

    def grad_at(x):
        x = _t(x).requires_grad_()
        (g,) = fg.autograd.grad(loss(x), x)
        return g.numpy()

    w = np.linspace(-0.5, 0.5, 4)
    u = np.array([1.0, 0.0, -1.0, 2.0])
    with fwAD.dual_level():
        wd = fwAD.make_dual(_t(w).requires_grad_(), _t(u))
        (g,) = fg.autograd.grad(loss(wd), wd, create_graph=create_graph)
        hvp = fwAD.unpack_dual(g).tangent.detach().numpy()
    eps = 1e-6
    fd = (grad_at(w + eps * u) - grad_at(w - eps * u)) / (2 * eps)
    assert np.allclose(hvp, fd, atol=1e-6)


def test_tangents_are_differentiable_by_reverse_mode():
    # tangent of sin(x) along v is cos(x) v; its gradient with respect to x is -sin(x) v
    x = _t([0.4, -1.0]).requires_grad_()
    v = _t([2.0, 3.0])
    with fwAD.dual_level():
        t = fwAD.unpack_dual(fwAD.make_dual(x, v).sin()).tangent
        assert t.requires_grad
        (g,) = fg.autograd.grad(t.sum(), x)
    xs, vs = x.detach().numpy(), v.numpy()
    assert np.allclose(g.numpy(), -np.sin(xs) * vs)
