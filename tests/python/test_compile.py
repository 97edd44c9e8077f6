"""``compile`` / ``torch.compiler``: ferrograd runs eagerly, so a compiled model must compute
what the model computes (the same numbers, the same gradients into the same parameters), come
back in the shape torch returns (``OptimizedModule``, ``_orig_mod.`` state_dict keys, the
wrapped function's name) and refuse torch's bad arguments with torch's messages; compared with
torch when it is installed."""

from __future__ import annotations

import io
from typing import Any

import ferrograd as fg
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def _model(lib: Any) -> Any:
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.GELU(), lib.nn.Linear(4, 2))


def test_a_compiled_module_computes_and_trains_the_original() -> None:
    m = _model(fg)
    c = fg.compile(m)
    x = fg.tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    assert type(c).__name__ == "OptimizedModule" and c._orig_mod is m
    assert c._orig_mod[0] is m[0] and c.training
    # One SGD step through the compiled module moves the original's parameters.
    before = m[0].weight.detach().clone()
    opt = fg.optim.SGD(c.parameters(), lr=0.5)
    c(x).pow(2).sum().backward()
    grad = m[0].weight.grad.clone()
    opt.step()
    np.testing.assert_allclose(m[0].weight.detach().numpy(), (before - 0.5 * grad).numpy())
    c.eval()
    assert not m.training


def test_hooks_on_the_original_run_and_state_dict_keys_carry_orig_mod() -> None:
    m = _model(fg)
    seen = []
    m.register_forward_hook(lambda mod, i, o: seen.append(o.shape))
    c = fg.compile(m, mode="max-autotune", fullgraph=True, dynamic=False)
    c(fg.ones(2, 3))
    assert seen == [(2, 2)]
    keys = list(c.state_dict())
    assert keys == ["_orig_mod." + k for k in m.state_dict()]
    buf = io.BytesIO()
    fg.save(c.state_dict(), buf)
    buf.seek(0)
    fresh = fg.compile(_model(fg))
    fresh.load_state_dict(fg.load(buf))
    with fg.no_grad():
        np.testing.assert_array_equal(fresh(fg.ones(1, 3)).numpy(), c(fg.ones(1, 3)).numpy())


def test_functions_decorators_disable_and_module_compile() -> None:
    def f(x: Any) -> Any:
        """doc"""
        return x.sin() * 2

    g = fg.compile(f, backend="eager")
    assert g.__name__ == "f" and g.__doc__ == "doc"
    x = fg.tensor([0.5, 1.0], requires_grad=True)
    (gx,) = fg.autograd.grad(g(x).sum(), x)
    np.testing.assert_allclose(gx.numpy(), 2 * np.cos([0.5, 1.0]), rtol=1e-6)

    @fg.compile(mode="reduce-overhead")
    def h(t: Any) -> Any:
        return t + 1

    assert h(fg.ones(1)).item() == 2.0
    m = _model(fg)
    assert fg.compile(m, disable=True) is m
    assert m.compile(mode="default") is None and type(m).__name__ == "Sequential"
    assert fg.compiler.disable(f) is f and fg.compiler.disable()(f) is f
    assert not fg.compiler.is_compiling() and not fg.compiler.is_dynamo_compiling()


@pytest.mark.parametrize(
    "call,err,msg",
    [
        (lambda m: fg.compile(m, mode="fast"), RuntimeError, "Unrecognized mode=fast"),
        (lambda m: fg.compile(m, mode="default", options={}), RuntimeError, "Either mode"),
        (lambda m: fg.compile(5), AssertionError, "A callable function is expected"),
        (lambda m: fg.compile()(None), RuntimeError, "Model can't be None"),
        (lambda m: fg.compile(m, backend=3), TypeError, "backend must be"),
    ],
)
def test_bad_arguments_raise_torchs_errors(call: Any, err: type, msg: str) -> None:
    with pytest.raises(err, match=msg):
        call(_model(fg))


@needs_torch
def test_matches_torch_compile_shape_and_messages() -> None:
    c = fg.compile(_model(fg))
    t = torch.compile(_model(torch))
    assert type(c).__name__ == type(t).__name__
    assert list(c.state_dict()) == list(t.state_dict())
    assert repr(c) == repr(t)
    for bad in ({"mode": "fast"}, {"mode": "default", "options": {}}):
        with pytest.raises(RuntimeError) as ours:
            fg.compile(_model(fg), **bad)
        with pytest.raises(RuntimeError) as theirs:
            torch.compile(_model(torch), **bad)
        assert str(ours.value) == str(theirs.value)
