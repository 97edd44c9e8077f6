"""``ferrograd.func.functional_call``, ``stack_module_state`` and the deprecated
``nn.utils.stateless.functional_call``: swapped state, restoration (also after an exception),
tied weights, strict keys, several dicts, gradients through the call, and torch's messages."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import nn
from ferrograd.func import functional_call, grad, stack_module_state

try:
    import torch
    import torch.func as TF
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def npy(x):
    return np.asarray(x.detach().numpy())


def close(x, y, tol=1e-6):
    np.testing.assert_allclose(npy(x), np.asarray(y), atol=tol, rtol=tol)


def _tied_cls(lib):
    class Tied(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(2, 2, bias=False)
            self.b = lib.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("buf", lib.ones(2))

        def forward(self, x):
            return self.b(self.a(x)) + self.buf

    return Tied


Tied = _tied_cls(fg)


def test_functional_call_uses_given_tensors_and_restores_the_module():
    lin = nn.Linear(3, 2)
    w0, b0 = lin.weight, lin.bias
    w = fg.ones(2, 3)
    b = fg.tensor([1.0, -1.0])
    x = fg.tensor([[1.0, 2.0, 3.0]])
    out = functional_call(lin, {"weight": w, "bias": b}, (x,))
    close(out, [[7.0, 5.0]])
    assert lin.weight is w0 and lin.bias is b0
    assert isinstance(lin.weight, nn.Parameter)
    close(lin(x), npy(x) @ npy(w0).T + npy(b0))


def test_functional_call_partial_dict_keeps_other_parameters():
    lin = nn.Linear(3, 2)
    x = fg.ones(1, 3)
    out = functional_call(lin, {"bias": fg.zeros(2)}, x)  # a lone argument need not be a tuple
    close(out, npy(x) @ npy(lin.weight).T)


def test_functional_call_args_kwargs_and_tuple_of_dicts():
    lin = nn.Linear(2, 2)
    w = fg.eye(2) * 2
    out = functional_call(
        lin, ({"weight": w}, {"bias": fg.zeros(2)}), kwargs={"input": fg.ones(1, 2)}
    )
    close(out, [[2.0, 2.0]])


def test_functional_call_restores_when_the_call_raises():
    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    w0 = m.lin.weight
    with pytest.raises(ValueError, match="boom"):
        functional_call(m, {"lin.weight": fg.zeros(2, 2)}, fg.ones(1, 2))
    assert m.lin.weight is w0


def test_functional_call_unexpected_key_is_set_then_removed_when_not_strict():
    lin = nn.Linear(2, 2)
    functional_call(lin, {"extra": fg.ones(1)}, fg.ones(1, 2))
    assert not hasattr(lin, "extra")


def test_functional_call_tied_weights_follow_each_other():
    m = Tied()
    w = fg.full((2, 2), 2.0)
    x = fg.ones(1, 2)
    close(functional_call(m, {"a.weight": w}, x), [[17.0, 17.0]])  # both layers see w
    b0 = npy(m.b.weight)
    untied = functional_call(m, {"a.weight": w}, x, tie_weights=False)
    close(untied, (np.ones((1, 2)) @ npy(w).T) @ b0.T + 1)
    close(functional_call(m, {"a.weight": w, "b.weight": w}, x), [[17.0, 17.0]])
    with pytest.raises(ValueError, match="which are tied. Consider using tie_weights=False"):
        functional_call(m, {"a.weight": w, "b.weight": w * 2}, x)
    assert m.a.weight is m.b.weight


def test_functional_call_strict_names_missing_and_unexpected_keys():
    m = Tied()
    w = fg.ones(2, 2)
    with pytest.raises(RuntimeError) as info:
        functional_call(m, {"a.weight": w}, fg.ones(1, 2), strict=True)
    assert str(info.value) == "Error(s) in reparametrizing for Tied:\n\tMissing key(s): 'buf'."
    with pytest.raises(RuntimeError) as info:
        functional_call(m, {"a.weight": w, "buf": fg.zeros(2), "zz": w}, fg.ones(1, 2), strict=True)
    assert "Unexpected key(s): 'zz'." in str(info.value)
    out = functional_call(m, {"a.weight": w, "buf": fg.zeros(2)}, fg.ones(1, 2), strict=True)
    close(out, [[4.0, 4.0]])


def test_functional_call_replaces_buffers_and_in_place_updates_land_in_the_dict():
    bn = nn.BatchNorm1d(2)
    state = {k: v.clone() for k, v in bn.named_buffers()}
    x = fg.tensor([[1.0, 2.0], [3.0, 6.0]])
    functional_call(bn, state, x)
    close(state["running_mean"], [0.2, 0.4])  # momentum 0.1 of the batch mean [2, 4]
    close(bn.running_mean, [0.0, 0.0])


def test_functional_call_bad_dicts_raise():
    lin = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(lin, ({"bias": fg.zeros(2)}, {"bias": fg.zeros(2)}), fg.ones(1, 2))
    with pytest.raises(ValueError, match="to be a dict, or a list/tuple of dicts"):
        functional_call(lin, 3, fg.ones(1, 2))
    with pytest.raises(ValueError, match="to be dictionaries"):
        functional_call(lin, [3], fg.ones(1, 2))
    with pytest.raises(TypeError, match="is not an instance of torch.Tensor"):
        functional_call(lin, {"bias": 3}, fg.ones(1, 2))
    with pytest.raises(AttributeError, match="Linear has no attribute `c`"):
        functional_call(lin, {"c.d": fg.ones(1)}, fg.ones(1, 2))
    assert isinstance(lin.bias, nn.Parameter)


def test_grad_through_functional_call_of_linear_is_closed_form():
    lin = nn.Linear(3, 2)
    x = fg.tensor([[1.0, 2.0, 3.0], [0.0, -1.0, 1.0]])

    def loss(params, x):
        return functional_call(lin, params, (x,)).sum()

    params = {k: v.detach() for k, v in lin.named_parameters()}
    g = grad(loss)(params, x)
    assert list(g) == ["weight", "bias"]
    close(g["weight"], np.tile(npy(x).sum(0), (2, 1)))
    close(g["bias"], [2.0, 2.0])
    assert not g["weight"].requires_grad
    assert lin.weight.grad is None


def test_grad_of_module_parameters_that_require_grad_stays_differentiable():
    lin = nn.Linear(2, 1)
    params = dict(lin.named_parameters())
    x = fg.tensor([[1.0, 2.0]])
    g = grad(lambda p: (functional_call(lin, p, x) ** 2).sum())(params)
    assert g["weight"].requires_grad
    g["bias"].sum().backward()  # d/dθ of 2*(w·x + b)
    close(lin.bias.grad, [2.0])
    close(lin.weight.grad, [[2.0, 4.0]])


def test_deprecated_stateless_functional_call_warns_and_works():
    lin = nn.Linear(2, 2)
    with pytest.warns(FutureWarning, match="Please use `torch.func.functional_call`"):
        out = nn.utils.stateless.functional_call(
            lin, {"weight": fg.eye(2), "bias": fg.ones(2)}, (fg.ones(1, 2),)
        )
    close(out, [[2.0, 2.0]])


# ----- stack_module_state -------------------------------------------------------------------------


def test_stack_module_state_stacks_along_new_dim_0_as_new_leaves():
    models = [nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)) for _ in range(5)]
    params, buffers = stack_module_state(models)
    assert list(params) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert tuple(params["0.weight"].shape) == (5, 4, 3)
    assert params["0.weight"].is_leaf and params["0.weight"].requires_grad
    close(params["0.bias"][2], npy(models[2][0].bias))
    assert tuple(buffers["1.running_var"].shape) == (5, 4)
    assert not buffers["1.running_var"].requires_grad


def test_stack_module_state_errors():
    with pytest.raises(RuntimeError, match="Expected at least one model, got 0."):
        stack_module_state([])
    with pytest.raises(RuntimeError, match="Expected all models to be of the same class."):
        stack_module_state([nn.Linear(2, 2), Tied()])
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        stack_module_state([nn.Linear(2, 2), nn.Linear(2, 2).eval()])
    with pytest.raises(RuntimeError, match="Expected weight from each model to have the same"):
        stack_module_state([nn.Linear(2, 2), nn.Linear(2, 2).requires_grad_(False)])


# ----- against torch ------------------------------------------------------------------------------


def _error_cases(lib, F):
    m = _tied_cls(lib)()
    x = lib.ones(1, 2)
    w = lib.full((2, 2), 2.0)
    return [
        lambda: F.functional_call(m, {"a.weight": w}, x, strict=True),
        lambda: F.functional_call(
            m, {"a.weight": w, "buf": lib.zeros(2), "zzz": w, "c.d": w}, x, strict=True
        ),
        lambda: F.functional_call(m, {"a.weight": w, "b.weight": w * 2}, x),
        lambda: F.functional_call(m, ({"a.weight": w}, {"a.weight": w}), (x,)),
        lambda: F.functional_call(m, 3, (x,)),
        lambda: F.functional_call(m, [3], (x,)),
        lambda: F.functional_call(m, {"c.d": w}, (x,)),
        lambda: F.stack_module_state([]),
        lambda: F.stack_module_state([lib.nn.Linear(2, 2), m]),
        lambda: F.stack_module_state([lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).eval()]),
    ]


@pytest.mark.parametrize("i", range(len(_error_cases(fg, fg.func))))
def test_errors_match_torch(i):
    if torch is None:
        pytest.skip("torch not installed")
    with pytest.raises(Exception) as theirs:  # noqa: B017 - whatever torch raises
        _error_cases(torch, TF)[i]()
    with pytest.raises(theirs.type) as ours:
        _error_cases(fg, fg.func)[i]()
    assert str(ours.value) == str(theirs.value)


def test_functional_call_results_match_torch():
    if torch is None:
        pytest.skip("torch not installed")
    w = np.array([[1.0, -2.0], [0.5, 3.0]])
    results = []
    for lib, F in ((fg, fg.func), (torch, TF)):
        m = _tied_cls(lib)()
        x = lib.tensor([[0.5, -1.0]])
        wt = lib.tensor(w, dtype=lib.float32)
        results.append(
            [
                F.functional_call(m, {"a.weight": wt}, x).detach().numpy(),
                F.functional_call(m, ({"a.weight": wt}, {"buf": lib.zeros(2)}), (x,))
                .detach()
                .numpy(),
            ]
        )
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
