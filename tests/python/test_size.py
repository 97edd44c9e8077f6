"""ferrograd.Size: what .shape and .size() return, a tuple subclass as torch.Size."""

import pickle

import ferrograd as fg
import numpy as np
import pytest


def test_shape_is_a_size_tuple():
    s = fg.ones(2, 3, 4).shape
    assert isinstance(s, fg.Size) and isinstance(s, tuple)
    assert s == (2, 3, 4) and fg.ones(2, 3, 4).size() == s and s.numel() == 24
    assert (
        repr(s) == "ferrograd.Size([2, 3, 4])" and repr(fg.ones(()).shape) == "ferrograd.Size([])"
    )
    assert isinstance(s[1:], fg.Size) and s[1:] == (3, 4) and s[-1] == 4
    # Built without Size()'s validation: the dims must still be plain ints.
    assert all(type(d) is int for d in s) and type(s[0]) is int and type(s[::2]) is fg.Size
    assert s[::2] == (2, 4) and s[np.int64(1)] == 3
    with pytest.raises(TypeError, match="tuple indices must be integers or slices"):
        s["a"]
    assert isinstance(s + (5,), fg.Size) and isinstance((1,) + s, fg.Size)
    assert pickle.loads(pickle.dumps(s)) == s
    assert fg.zeros(s).shape == s and fg.ones(2, 3).reshape(s[:1] + (3,)).shape == (2, 3)


def test_size_rejects_non_ints():
    with pytest.raises(TypeError, match="Size\\(\\) takes an iterable of 'int'"):
        fg.Size([1.5])


def test_size_behaves_like_torch_size():
    torch = pytest.importorskip("torch")
    ours, theirs = fg.Size([2, 3, 4]), torch.Size([2, 3, 4])
    assert ours.numel() == theirs.numel() and list(ours[1:]) == list(theirs[1:])
    assert type(ours + (1,)).__name__ == type(theirs + (1,)).__name__ == "Size"
    assert repr(ours).replace("ferrograd", "torch") == repr(theirs)
