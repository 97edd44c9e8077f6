"""Side-by-side comparison with torch on random float64 inputs (skipped when torch is absent).

Every op is written once as ``op(m, *tensors)`` and run with ``m = fg`` and ``m = torch``.
"""

import operator

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

torch = pytest.importorskip("torch")


# Each op's values, gradients, Hessian-vector products and grad_fn names against torch are
# entries of the op table (``optables/<family>.py``, run by ``test_op_table.py``); here the
# composites, float32 runs, dtype promotion and repr.


def _rand(rng, shape):
    return rng.uniform(-2.0, 2.0, shape)


def _make_inputs(rng, shapes):
    arrays = [_rand(rng, s) for s in shapes]
    fg_in = [fg.tensor(a, dtype=fg.float64, requires_grad=True) for a in arrays]
    th_in = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    return arrays, fg_in, th_in


# --------------------------------------------------------------------------------------------
# composites
# --------------------------------------------------------------------------------------------


def _mlp(m, x, w1, b1, w2):
    return ((x @ w1 + b1).tanh() @ w2).sigmoid().mean()


def _softplus(m, x):
    return (1 + x.exp()).log().sum()


def _swish(m, x):
    return (x * m.sigmoid(x)).sum(dim=0).mean()


def _variance(m, x):
    centered = x - x.mean(dim=1, keepdim=True)
    return (centered * centered).mean(dim=1).sum()


def _softmax_attention(m, q, k, v):
    scores = (q @ k.transpose(0, 1)) / 2.0
    e = scores.exp()
    p = e / e.sum(dim=-1, keepdim=True)
    return (p @ v).tanh().sum()


def _shape_soup(m, x):
    y = x.reshape(2, 12).t().unsqueeze(0).expand(3, 12, 2)
    return (y[1:, ::3].sin() * y[0, :4].cos()).relu().sum()


COMPOSITES = [
    ("mlp", _mlp, [(4, 3), (3, 5), (5,), (5, 2)]),
    ("softplus", _softplus, [(3, 4)]),
    ("swish", _swish, [(3, 4)]),
    ("variance", _variance, [(3, 5)]),
    ("attention", _softmax_attention, [(4, 3), (5, 3), (5, 2)]),
    ("shape-soup", _shape_soup, [(2, 3, 4)]),
]


@pytest.mark.parametrize(("label", "fn", "shapes"), COMPOSITES, ids=[c[0] for c in COMPOSITES])
def test_composite_matches_torch(label, fn, shapes, rng):
    _, fg_in, th_in = _make_inputs(rng, shapes)
    fg_out = fn(fg, *fg_in)
    th_out = fn(torch, *th_in)
    npt.assert_allclose(fg_out.item(), th_out.item(), rtol=1e-12)
    fg_grads = fg.autograd.grad(fg_out, fg_in)
    th_grads = torch.autograd.grad(th_out, th_in)
    for a, b in zip(fg_grads, th_grads):
        npt.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("label", "fn", "shapes"), COMPOSITES, ids=[c[0] for c in COMPOSITES])
def test_composite_float32_matches_torch(label, fn, shapes, rng):
    arrays = [_rand(rng, s).astype(np.float32) for s in shapes]
    fg_in = [fg.tensor(a, requires_grad=True) for a in arrays]
    th_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    fg_out, th_out = fn(fg, *fg_in), fn(torch, *th_in)
    assert fg_out.dtype == fg.float32
    npt.assert_allclose(fg_out.item(), th_out.item(), rtol=1e-5)
    fg_out.backward()
    th_out.backward()
    for a, b in zip(fg_in, th_in):
        assert a.grad.dtype == fg.float32
        npt.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------------
# dtype promotion and repr
# --------------------------------------------------------------------------------------------

DTYPE_PAIRS = [
    ("float32", fg.float32, torch.float32),
    ("float64", fg.float64, torch.float64),
    ("int64", fg.int64, torch.int64),
    ("bool", fg.bool, torch.bool),
]
FG_DTYPE_NAME = {f: n for n, f, _ in DTYPE_PAIRS}
TH_DTYPE_NAME = {t: n for n, _, t in DTYPE_PAIRS}

PROMOTION_OPERANDS = [
    ("f32", [1.5, 2.0], "float32"),
    ("f64", [1.5, 2.0], "float64"),
    ("i64", [1, 2], "int64"),
    ("bool", [True, False], "bool"),
    ("py-int", 3, None),
    ("py-float", 2.5, None),
    ("py-bool", True, None),
]


def _operand(mod, data, dtype_name):
    if dtype_name is None:
        return data
    return mod.tensor(data, dtype=getattr(mod, dtype_name))


PROMOTION_PAIRS = [
    (a, b)
    for a in PROMOTION_OPERANDS
    for b in PROMOTION_OPERANDS
    if a[2] is not None or b[2] is not None
]


@pytest.mark.parametrize("opname", ["add", "mul", "truediv"])
@pytest.mark.parametrize(
    ("lhs", "rhs"), PROMOTION_PAIRS, ids=[f"{a[0]}-{b[0]}" for a, b in PROMOTION_PAIRS]
)
def test_result_dtype_matches_torch(lhs, rhs, opname):
    op = getattr(operator, opname)
    fg_out = op(_operand(fg, lhs[1], lhs[2]), _operand(fg, rhs[1], rhs[2]))
    th_out = op(_operand(torch, lhs[1], lhs[2]), _operand(torch, rhs[1], rhs[2]))
    assert FG_DTYPE_NAME[fg_out.dtype] == TH_DTYPE_NAME[th_out.dtype]
    npt.assert_allclose(fg_out.numpy().astype(np.float64), th_out.numpy().astype(np.float64))


REPR_DATA = [
    [1.0, 2.0],
    [0.5, -1.25, 3.0],
    [[1.0, 2.0], [3.0, 4.0]],
    [1, -2, 3],
    [True, False],
    2.0,
    7,
    [1e-5, 1.0],
    [123456.0, 1.0],
]


@pytest.mark.parametrize("data", REPR_DATA, ids=[str(d) for d in REPR_DATA])
def test_repr_matches_torch(data):
    assert repr(fg.tensor(data)) == repr(torch.tensor(data))


def test_repr_with_grad_fn_matches_torch():
    a = [1.0, 2.0, 3.0]
    fx, tx = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    assert repr(fx) == repr(tx)
    assert repr(fx * 2) == repr(tx * 2)
    assert repr((fx * fx).sum()) == repr((tx * tx).sum())
