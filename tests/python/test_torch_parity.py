"""Side-by-side comparison with torch on random float64 inputs (skipped when torch is absent).

Every op is written once as ``op(m, *tensors)`` and run with ``m = fg`` and ``m = torch``.
"""

import operator

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

torch = pytest.importorskip("torch")


def _rand(rng, shape, domain):
    if domain == "positive":
        return rng.uniform(0.5, 2.5, shape)
    if domain == "nonzero":
        return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 2.0, shape)
    return rng.uniform(-2.0, 2.0, shape)


# label, input shapes, op(m, *ts), domain per input, compare grad_fn names.  Names are not
# compared where torch's node depends on how it decomposes a composite op (matmul of 1-D or
# batched operands, reflected scalar ops, multi-index getitem).
CASES = [
    ("add", [(3, 4), (3, 4)], lambda m, a, b: a + b, "aa", True),
    ("sub", [(3, 4), (3, 4)], lambda m, a, b: a - b, "aa", True),
    ("mul", [(3, 4), (3, 4)], lambda m, a, b: a * b, "aa", True),
    ("div", [(3, 4), (3, 4)], lambda m, a, b: a / b, "an", True),
    ("pow-tensor", [(3, 4), (3, 4)], lambda m, a, b: a**b, "pa", True),
    ("pow-scalar", [(5,)], lambda m, a: a**3, "a", True),
    ("pow-frac", [(5,)], lambda m, a: a**1.5, "p", True),
    ("scalar-mul", [(5,)], lambda m, a: a * 2.5, "a", True),
    ("scalar-div", [(5,)], lambda m, a: a / 2.5, "a", True),
    ("rsub", [(5,)], lambda m, a: 2.5 - a, "a", False),
    ("rdiv", [(5,)], lambda m, a: 2.5 / a, "n", False),
    ("rpow", [(5,)], lambda m, a: 2.5**a, "a", False),
    ("radd", [(5,)], lambda m, a: 2.5 + a, "a", False),
    ("neg", [(5,)], lambda m, a: -a, "a", True),
    ("neg-fn", [(5,)], lambda m, a: m.neg(a), "a", True),
    ("exp", [(2, 3)], lambda m, a: a.exp(), "a", True),
    ("exp-fn", [(2, 3)], lambda m, a: m.exp(a), "a", True),
    ("log", [(2, 3)], lambda m, a: a.log(), "p", True),
    ("sin", [(2, 3)], lambda m, a: a.sin(), "a", True),
    ("cos", [(2, 3)], lambda m, a: m.cos(a), "a", True),
    ("tanh", [(2, 3)], lambda m, a: a.tanh(), "a", True),
    ("sigmoid", [(2, 3)], lambda m, a: m.sigmoid(a), "a", True),
    ("relu", [(2, 3)], lambda m, a: a.relu(), "n", True),
    ("relu-fn", [(2, 3)], lambda m, a: m.relu(a), "n", True),
    ("sum", [(2, 3, 4)], lambda m, a: a.sum(), "a", True),
    ("sum-dim", [(2, 3, 4)], lambda m, a: a.sum(dim=1), "a", True),
    ("sum-dims-keep", [(2, 3, 4)], lambda m, a: a.sum(dim=(0, 2), keepdim=True), "a", True),
    ("mean", [(2, 3, 4)], lambda m, a: a.mean(), "a", True),
    ("mean-dim", [(2, 3, 4)], lambda m, a: m.mean(a, -1), "a", True),
    ("mean-keep", [(2, 3, 4)], lambda m, a: a.mean(dim=0, keepdim=True), "a", True),
    ("mm", [(3, 4), (4, 5)], lambda m, a, b: a @ b, "aa", True),
    ("dot", [(4,), (4,)], lambda m, a, b: m.matmul(a, b), "aa", False),
    ("mv", [(3, 4), (4,)], lambda m, a, b: a.matmul(b), "aa", False),
    ("bmm", [(2, 3, 4), (2, 4, 5)], lambda m, a, b: a @ b, "aa", False),
    ("matmul-bcast", [(2, 1, 3, 4), (3, 4, 2)], lambda m, a, b: a @ b, "aa", False),
    ("vec-batched", [(4,), (2, 4, 3)], lambda m, a, b: a @ b, "aa", False),
    ("broadcast-add", [(2, 1, 3), (4, 1)], lambda m, a, b: a + b, "aa", True),
    ("broadcast-mul-0d", [(2, 3), ()], lambda m, a, b: a * b, "aa", True),
    ("broadcast-div", [(3, 1), (1, 4)], lambda m, a, b: a / b, "an", True),
    ("reshape", [(2, 3, 4)], lambda m, a: a.reshape(4, -1), "a", True),
    ("view", [(2, 3, 4)], lambda m, a: a.view(6, 4), "a", True),
    ("transpose", [(2, 3, 4)], lambda m, a: a.transpose(0, 2), "a", True),
    ("t", [(3, 4)], lambda m, a: a.t(), "a", True),
    ("unsqueeze", [(3, 4)], lambda m, a: a.unsqueeze(1), "a", True),
    ("squeeze-dim", [(3, 1, 4)], lambda m, a: a.squeeze(1), "a", True),
    ("squeeze-all", [(3, 1, 4, 1)], lambda m, a: a.squeeze(), "a", True),
    ("expand", [(3, 1)], lambda m, a: a.expand(3, 5), "a", True),
    ("select", [(3, 4)], lambda m, a: a[1], "a", True),
    ("slice", [(6, 2)], lambda m, a: a[1:5:2], "a", True),
    ("index-tuple", [(3, 4)], lambda m, a: a[1:, 2], "a", False),
    ("clone", [(3,)], lambda m, a: a.clone(), "a", True),
]
CASE_IDS = [c[0] for c in CASES]
DOMAINS = {"a": "any", "p": "positive", "n": "nonzero"}


def _make_inputs(rng, shapes, domains):
    arrays = [_rand(rng, s, DOMAINS[d]) for s, d in zip(shapes, domains)]
    fg_in = [fg.tensor(a, dtype=fg.float64, requires_grad=True) for a in arrays]
    th_in = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    return arrays, fg_in, th_in


@pytest.mark.parametrize(("label", "shapes", "op", "domains", "check_name"), CASES, ids=CASE_IDS)
def test_forward_and_grads_match_torch(label, shapes, op, domains, check_name, rng):
    _, fg_in, th_in = _make_inputs(rng, shapes, domains)
    fg_out = op(fg, *fg_in)
    th_out = op(torch, *th_in)
    assert tuple(fg_out.shape) == tuple(th_out.shape)
    npt.assert_allclose(fg_out.detach().numpy(), th_out.detach().numpy(), rtol=1e-12, atol=1e-14)

    w = rng.standard_normal(tuple(th_out.shape))
    (fg_out * fg.tensor(w)).sum().backward()
    (th_out * torch.tensor(w)).sum().backward()
    for i, (a, b) in enumerate(zip(fg_in, th_in)):
        assert tuple(a.grad.shape) == tuple(b.grad.shape)
        npt.assert_allclose(
            a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"grad of input {i}"
        )


@pytest.mark.parametrize(
    ("label", "shapes", "op", "domains", "check_name"),
    [c for c in CASES if c[4]],
    ids=[c[0] for c in CASES if c[4]],
)
def test_grad_fn_name_matches_torch(label, shapes, op, domains, check_name, rng):
    _, fg_in, th_in = _make_inputs(rng, shapes, domains)
    assert op(fg, *fg_in).grad_fn.name() == op(torch, *th_in).grad_fn.name()


@pytest.mark.parametrize(("label", "shapes", "op", "domains", "check_name"), CASES, ids=CASE_IDS)
def test_second_order_matches_torch(label, shapes, op, domains, check_name, rng):
    # Hessian-vector product of sum(w * op(inputs)**2): squaring makes even linear ops curved.
    arrays, fg_in, th_in = _make_inputs(rng, shapes, domains)
    with torch.no_grad():
        out_shape = tuple(op(torch, *th_in).shape)
    w = rng.standard_normal(out_shape)
    v = [rng.standard_normal(a.shape) for a in arrays]

    def hvp(m, inputs, wrap):
        out = (op(m, *inputs) ** 2 * wrap(w)).sum()
        grads = m.autograd.grad(out, inputs, create_graph=True)
        total = sum((g * wrap(vi)).sum() for g, vi in zip(grads, v))
        return [
            g.detach().numpy()
            for g in m.autograd.grad(total, inputs, allow_unused=True, materialize_grads=True)
        ]

    got = hvp(fg, fg_in, lambda a: fg.tensor(a))
    want = hvp(torch, th_in, lambda a: torch.tensor(a))
    for i, (a, b) in enumerate(zip(got, want)):
        npt.assert_allclose(a, b, rtol=1e-9, atol=1e-11, err_msg=f"input {i}")


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
    _, fg_in, th_in = _make_inputs(rng, shapes, "a" * len(shapes))
    fg_out = fn(fg, *fg_in)
    th_out = fn(torch, *th_in)
    npt.assert_allclose(fg_out.item(), th_out.item(), rtol=1e-12)
    fg_grads = fg.autograd.grad(fg_out, fg_in)
    th_grads = torch.autograd.grad(th_out, th_in)
    for a, b in zip(fg_grads, th_grads):
        npt.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("label", "fn", "shapes"), COMPOSITES, ids=[c[0] for c in COMPOSITES])
def test_composite_float32_matches_torch(label, fn, shapes, rng):
    arrays = [_rand(rng, s, "any").astype(np.float32) for s in shapes]
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
