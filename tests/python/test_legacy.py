"""Legacy spellings from older tutorials: typed tensor constructors, autograd.Variable, normal."""

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.autograd import Variable


def test_typed_constructors_and_isinstance():
    x = fg.FloatTensor([1, 2])
    assert x.dtype == fg.float32 and x.tolist() == [1.0, 2.0]
    assert fg.LongTensor([1.7]).tolist() == [1] and fg.DoubleTensor(2, 3).shape == (2, 3)
    assert fg.BoolTensor([1, 0]).tolist() == [True, False]
    assert isinstance(x, fg.FloatTensor) and not isinstance(x, fg.LongTensor)
    with pytest.raises(RuntimeError, match="CPU only"):
        fg.FloatTensor([1.0], device="cuda")


def test_variable_is_a_tensor_that_may_require_grad():
    t = fg.ones(3)
    v = Variable(t, requires_grad=True)
    assert isinstance(v, fg.Tensor) and isinstance(t, Variable) and v.requires_grad and v.is_leaf
    (v * 2).sum().backward()
    assert v.grad.tolist() == [2.0, 2.0, 2.0] and not t.requires_grad
    with pytest.raises(TypeError, match="Variable data has to be a tensor"):
        Variable([1.0])


def test_normal_shapes_and_moments():
    fg.manual_seed(0)
    s = fg.normal(2.0, 3.0, size=(200_000,))
    assert abs(s.mean().item() - 2.0) < 0.05 and abs(s.std().item() - 3.0) < 0.05
    assert tuple(fg.normal(fg.zeros(2, 1), fg.ones(3)).shape) == (2, 3)
    np.testing.assert_array_equal(fg.normal(fg.arange(3.0), 0.0).numpy(), [0.0, 1.0, 2.0])
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        fg.normal(0.0, -1.0, size=(2,))
