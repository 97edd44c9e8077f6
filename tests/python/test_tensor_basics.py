"""Tensor creation, dtypes and promotion, conversions, numpy interop, repr and Python protocols."""

import re

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

NUMPY_REQUIRES_GRAD_MSG = (
    "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
)


# --------------------------------------------------------------------------------------------
# creation from data
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "dtype", "np_dtype"),
    [
        ([1.0, 2.0, 3.5], fg.float32, np.float32),
        ([1, 2, 3], fg.int64, np.int64),
        ([True, False, True], fg.bool, np.bool_),
        ([1, 2.5], fg.float32, np.float32),
    ],
    ids=["float-list", "int-list", "bool-list", "mixed-int-float-list"],
)
def test_tensor_infers_default_dtype_from_python_data(data, dtype, np_dtype):
    t = fg.tensor(data)
    assert t.dtype == dtype
    arr = t.numpy()
    assert arr.dtype == np_dtype
    npt.assert_array_equal(arr, np.array(data, dtype=np_dtype))


def test_tensor_from_nested_lists_has_matching_shape_and_values():
    data = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    t = fg.tensor(data)
    assert t.shape == (2, 3)
    assert t.tolist() == data


def test_tensor_from_python_scalar_is_zero_dimensional():
    t = fg.tensor(3.5)
    assert t.shape == ()
    assert t.dim() == 0
    assert t.numel() == 1
    assert t.item() == 3.5
    assert t.dtype == fg.float32


@pytest.mark.parametrize(
    ("np_dtype", "dtype"),
    [(np.float32, fg.float32), (np.float64, fg.float64), (np.int64, fg.int64), (np.bool_, fg.bool)],
)
def test_tensor_from_numpy_array_keeps_dtype(np_dtype, dtype):
    arr = np.array([[1, 0, 3], [0, 5, 6]]).astype(np_dtype)
    t = fg.tensor(arr)
    assert t.dtype == dtype
    assert t.shape == (2, 3)
    npt.assert_array_equal(t.numpy(), arr)


@pytest.mark.parametrize(
    ("np_dtype", "dtype"),
    [(np.float32, fg.float32), (np.float64, fg.float64), (np.int64, fg.int64), (np.bool_, fg.bool)],
)
def test_tensor_from_numpy_scalar_keeps_dtype(np_dtype, dtype):
    # torch.tensor(np.float64(2.5)) is float64: a NumPy scalar is typed, unlike a Python float
    t = fg.tensor(np_dtype(2.5) if np_dtype != np.bool_ else np.bool_(True))
    assert t.dtype == dtype
    assert t.shape == ()
    assert t.item() == (np_dtype(2.5).item() if np_dtype != np.bool_ else True)


def test_tensor_copies_numpy_data():
    arr = np.array([1.0, 2.0, 3.0])
    t = fg.tensor(arr)
    arr[0] = 100.0
    assert t.tolist() == [1.0, 2.0, 3.0]


def test_tensor_dtype_argument_overrides_inference():
    t = fg.tensor([1, 2, 3], dtype=fg.float64)
    assert t.dtype == fg.float64
    npt.assert_array_equal(t.numpy(), np.array([1.0, 2.0, 3.0]))


def test_tensor_requires_grad_argument_makes_a_leaf():
    t = fg.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad
    assert t.is_leaf
    assert t.grad is None
    assert t.grad_fn is None


def test_dtype_aliases_equal_canonical_dtypes():
    assert fg.float == fg.float32
    assert fg.double == fg.float64
    assert fg.long == fg.int64
    assert fg.float32 != fg.float64
    assert fg.int64 != fg.bool


# --------------------------------------------------------------------------------------------
# factories
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "fill"), [(fg.zeros, 0.0), (fg.ones, 1.0)], ids=["zeros", "ones"]
)
@pytest.mark.parametrize("tuple_form", [False, True], ids=["varargs", "tuple"])
def test_zeros_ones_shape_dtype_and_values(factory, fill, tuple_form):
    t = factory((2, 3)) if tuple_form else factory(2, 3)
    assert t.shape == (2, 3)
    assert t.dtype == fg.float32
    assert not t.requires_grad
    npt.assert_array_equal(t.numpy(), np.full((2, 3), fill, dtype=np.float32))


@pytest.mark.parametrize("factory", [fg.zeros, fg.ones, fg.empty], ids=["zeros", "ones", "empty"])
def test_factories_accept_dtype_and_requires_grad(factory):
    i = factory(4, dtype=fg.int64)
    assert i.dtype == fg.int64
    assert i.shape == (4,)
    d = factory(2, 2, dtype=fg.float64, requires_grad=True)
    assert d.dtype == fg.float64
    assert d.requires_grad
    assert d.is_leaf


def test_empty_has_requested_shape_and_default_dtype():
    t = fg.empty(3, 2)
    assert t.shape == (3, 2)
    assert t.dtype == fg.float32


def test_full_fills_value():
    t = fg.full((2, 2), 7.5)
    assert t.shape == (2, 2)
    assert t.dtype == fg.float32
    npt.assert_array_equal(t.numpy(), np.full((2, 2), 7.5, dtype=np.float32))


def test_arange_integer_and_float_forms():
    a = fg.arange(5)
    assert a.dtype == fg.int64
    assert a.tolist() == [0, 1, 2, 3, 4]
    b = fg.arange(1, 2, 0.25)
    assert b.dtype == fg.float32
    npt.assert_allclose(b.numpy(), [1.0, 1.25, 1.5, 1.75])


def test_linspace_includes_both_endpoints():
    t = fg.linspace(0, 1, 5)
    assert t.dtype == fg.float32
    npt.assert_allclose(t.numpy(), [0.0, 0.25, 0.5, 0.75, 1.0], rtol=0, atol=1e-7)


def test_eye_is_identity():
    t = fg.eye(3)
    assert t.dtype == fg.float32
    npt.assert_array_equal(t.numpy(), np.eye(3, dtype=np.float32))


def test_rand_is_uniform_in_unit_interval():
    fg.manual_seed(0)
    t = fg.rand(100, 100)
    assert t.shape == (100, 100)
    assert t.dtype == fg.float32
    a = t.numpy()
    assert a.min() >= 0.0
    assert a.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.02


def test_randn_is_standard_normal():
    fg.manual_seed(0)
    a = fg.randn(200, 100).numpy()
    assert a.dtype == np.float32
    assert abs(a.mean()) < 0.05
    assert abs(a.std() - 1.0) < 0.05


def test_manual_seed_makes_sampling_reproducible():
    fg.manual_seed(1234)
    a = fg.randn(8).numpy()
    b = fg.rand(8).numpy()
    fg.manual_seed(1234)
    npt.assert_array_equal(fg.randn(8).numpy(), a)
    npt.assert_array_equal(fg.rand(8).numpy(), b)
    fg.manual_seed(4321)
    assert not np.array_equal(fg.randn(8).numpy(), a)


def test_like_factories_copy_shape_and_dtype_but_not_requires_grad():
    x = fg.ones(2, 3, dtype=fg.float64, requires_grad=True)
    for fn, check in [
        (fg.zeros_like, lambda a: np.array_equal(a, np.zeros((2, 3)))),
        (fg.ones_like, lambda a: np.array_equal(a, np.ones((2, 3)))),
        (fg.randn_like, lambda a: np.isfinite(a).all()),
    ]:
        t = fn(x)
        assert t.shape == (2, 3)
        assert t.dtype == fg.float64
        assert not t.requires_grad
        assert check(t.numpy())


# --------------------------------------------------------------------------------------------
# dtype promotion (torch rules)
# --------------------------------------------------------------------------------------------


def test_float32_tensor_times_python_float_stays_float32():
    t = fg.tensor([1.0, 2.0]) * 2.5
    assert t.dtype == fg.float32
    npt.assert_allclose(t.numpy(), [2.5, 5.0])


def test_float64_tensor_times_python_float_stays_float64():
    t = fg.tensor([1.0, 2.0], dtype=fg.float64) * 2.5
    assert t.dtype == fg.float64


def test_int64_tensor_times_python_float_is_float32():
    t = fg.tensor([1, 2]) * 2.5
    assert t.dtype == fg.float32
    npt.assert_allclose(t.numpy(), [2.5, 5.0])


def test_int64_tensor_plus_python_int_stays_int64():
    t = fg.tensor([1, 2]) + 3
    assert t.dtype == fg.int64
    assert t.tolist() == [4, 5]


def test_int64_plus_float64_tensor_is_float64():
    t = fg.tensor([1, 2]) + fg.tensor([0.5, 0.25], dtype=fg.float64)
    assert t.dtype == fg.float64
    npt.assert_array_equal(t.numpy(), [1.5, 2.25])


def test_float32_plus_float64_tensor_is_float64():
    t = fg.tensor([1.0]) + fg.tensor([2.0], dtype=fg.float64)
    assert t.dtype == fg.float64


def test_bool_tensor_plus_python_int_is_int64():
    t = fg.tensor([True, False]) + 1
    assert t.dtype == fg.int64
    assert t.tolist() == [2, 1]


def test_int64_true_division_is_float32():
    t = fg.tensor([1, 3]) / fg.tensor([2, 2])
    assert t.dtype == fg.float32
    npt.assert_allclose(t.numpy(), [0.5, 1.5])


# --------------------------------------------------------------------------------------------
# shape queries and scalars
# --------------------------------------------------------------------------------------------


def test_shape_size_dim_ndim_numel():
    t = fg.zeros(2, 3, 4)
    assert isinstance(t.shape, tuple)
    assert t.shape == (2, 3, 4)
    assert tuple(t.size()) == (2, 3, 4)
    assert t.size(1) == 3
    assert t.size(-1) == 4
    assert t.dim() == 3
    assert t.ndim == 3
    assert t.numel() == 24


@pytest.mark.parametrize(
    ("data", "dtype", "expected", "pytype"),
    [
        (2.5, fg.float32, 2.5, float),
        (2.5, fg.float64, 2.5, float),
        (7, fg.int64, 7, int),
        (True, fg.bool, True, bool),
    ],
)
def test_item_returns_python_scalar(data, dtype, expected, pytype):
    v = fg.tensor([data], dtype=dtype).item()
    assert type(v) is pytype
    assert v == expected


def test_item_on_multi_element_tensor_raises():
    with pytest.raises(RuntimeError):
        fg.tensor([1.0, 2.0]).item()


def test_tolist_returns_nested_python_values():
    assert fg.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    out = fg.tensor([[0.5], [1.5]]).tolist()
    assert out == [[0.5], [1.5]]
    assert type(out[0][0]) is float
    assert fg.tensor([True, False]).tolist() == [True, False]
    assert fg.tensor(4.0).tolist() == 4.0


def test_len_is_size_of_first_dimension():
    assert len(fg.zeros(5, 2)) == 5
    assert len(fg.tensor([1, 2, 3])) == 3


def test_len_of_zero_dim_tensor_raises_type_error():
    with pytest.raises(TypeError):
        len(fg.tensor(1.0))


@pytest.mark.parametrize(
    ("data", "expected"),
    [([0.0], False), ([2.0], True), (0, False), (-3, True), ([[True]], True), (False, False)],
)
def test_bool_of_single_element_tensor(data, expected):
    assert bool(fg.tensor(data)) is expected


def test_bool_of_multi_element_tensor_raises():
    with pytest.raises(RuntimeError):
        bool(fg.tensor([1.0, 2.0]))


def test_hash_is_by_identity():
    a = fg.tensor([1.0, 2.0])
    b = fg.tensor([1.0, 2.0])
    assert hash(a) == hash(a)
    table = {a: "a", b: "b"}
    assert len(table) == 2
    assert table[a] == "a"
    assert table[b] == "b"
    assert a in {a}
    assert b not in {a}


# --------------------------------------------------------------------------------------------
# conversions
# --------------------------------------------------------------------------------------------


def test_float_double_long_conversions():
    t = fg.tensor([1.7, -1.7, 2.0], dtype=fg.float64)
    assert t.float().dtype == fg.float32
    assert t.double().dtype == fg.float64
    lng = t.long()
    assert lng.dtype == fg.int64
    assert lng.tolist() == [1, -1, 2]  # truncation toward zero
    npt.assert_allclose(t.float().numpy(), [1.7, -1.7, 2.0], rtol=1e-6)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64, fg.int64])
def test_to_dtype_converts(dtype):
    t = fg.tensor([1.0, 2.0, 3.0]).to(dtype)
    assert t.dtype == dtype
    assert t.tolist() == [1, 2, 3]


def test_clone_does_not_share_storage():
    a = fg.tensor([1.0, 2.0])
    c = a.clone()
    c.add_(10.0)
    assert a.tolist() == [1.0, 2.0]
    assert c.tolist() == [11.0, 12.0]


def test_contiguous_keeps_values_of_transposed_tensor():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = fg.tensor(a).t().contiguous()
    assert t.shape == (3, 2)
    npt.assert_array_equal(t.numpy(), a.T)


def test_detach_shares_storage_and_drops_autograd():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    assert d.is_leaf
    assert d.grad_fn is None
    d.add_(1.0)
    assert x.tolist() == [2.0, 3.0]


def test_requires_grad_underscore_sets_flag_and_returns_self():
    t = fg.tensor([1.0, 2.0])
    assert not t.requires_grad
    r = t.requires_grad_()
    assert r is t
    assert t.requires_grad
    assert t.is_leaf
    t.requires_grad_(False)
    assert not t.requires_grad


# --------------------------------------------------------------------------------------------
# numpy interop
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "np_dtype"),
    [(fg.float32, np.float32), (fg.float64, np.float64), (fg.int64, np.int64), (fg.bool, np.bool_)],
)
def test_numpy_maps_dtypes(dtype, np_dtype):
    t = fg.ones(2, 2, dtype=dtype)
    arr = t.numpy()
    assert isinstance(arr, np.ndarray)
    assert arr.dtype == np_dtype
    assert arr.shape == (2, 2)


def test_numpy_on_tensor_requiring_grad_raises():
    x = fg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(NUMPY_REQUIRES_GRAD_MSG)):
        x.numpy()
    npt.assert_array_equal(x.detach().numpy(), np.ones(3, dtype=np.float32))


def test_numpy_on_non_leaf_requiring_grad_raises():
    y = fg.ones(3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=re.escape(NUMPY_REQUIRES_GRAD_MSG)):
        y.numpy()


def test_np_asarray_of_tensor():
    t = fg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=fg.float64)
    arr = np.asarray(t)
    assert arr.dtype == np.float64
    npt.assert_array_equal(arr, [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int64])
def test_numpy_round_trip_preserves_values_and_dtype(np_dtype, rng):
    arr = (rng.standard_normal((3, 4)) * 10).astype(np_dtype)
    back = fg.tensor(arr).numpy()
    assert back.dtype == arr.dtype
    npt.assert_array_equal(back, arr)
    back2 = fg.from_numpy(arr.copy()).numpy()
    npt.assert_array_equal(back2, arr)


def test_from_numpy_keeps_dtype_and_shape():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = fg.from_numpy(arr)
    assert t.dtype == fg.float64
    assert t.shape == (2, 3)


def test_from_numpy_numpy_write_is_visible_in_tensor():
    arr = np.zeros(4, dtype=np.float32)
    t = fg.from_numpy(arr)
    arr[1] = 5.0
    assert t.tolist() == [0.0, 5.0, 0.0, 0.0]
    assert t[1].item() == 5.0


def test_from_numpy_tensor_write_is_visible_in_numpy():
    arr = np.ones(3, dtype=np.float64)
    t = fg.from_numpy(arr)
    t.mul_(3.0)
    npt.assert_array_equal(arr, [3.0, 3.0, 3.0])
    t.fill_(-1.0)
    npt.assert_array_equal(arr, [-1.0, -1.0, -1.0])
    t.zero_()
    npt.assert_array_equal(arr, [0.0, 0.0, 0.0])


# --------------------------------------------------------------------------------------------
# repr
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: fg.tensor([1.0, 2.0]), "tensor([1., 2.])"),
        (lambda: fg.tensor([1.5, 2.0]), "tensor([1.5000, 2.0000])"),
        (lambda: fg.tensor([0.1, 0.25]), "tensor([0.1000, 0.2500])"),
        (lambda: fg.tensor([1, 2]), "tensor([1, 2])"),
        (lambda: fg.tensor(3.0), "tensor(3.)"),
        (lambda: fg.tensor(3), "tensor(3)"),
        (lambda: fg.tensor([True, False]), "tensor([ True, False])"),
        (lambda: fg.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
        (lambda: fg.tensor([1.0, 2.0], requires_grad=True), "tensor([1., 2.], requires_grad=True)"),
    ],
    ids=[
        "float",
        "float-decimals",
        "float-small",
        "int",
        "scalar-float",
        "scalar-int",
        "bool",
        "2d",
        "requires-grad",
    ],
)
def test_repr_matches_torch_format(make, expected):
    assert repr(make()) == expected


def test_repr_shows_grad_fn():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    assert repr(x.sum()) == "tensor(6., grad_fn=<SumBackward0>)"
    assert repr(x * 2) == "tensor([2., 4., 6.], grad_fn=<MulBackward0>)"


def test_grad_fn_repr_shows_node_class_name():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert repr(y.grad_fn).startswith("<MulBackward0 object")
    assert y.grad_fn.name() == "MulBackward0"


@pytest.mark.parametrize(
    "shape,dims",
    [
        ((32, 32, 28, 28), (0, 2, 3)),
        ((4, 5, 6, 7), (1, 3)),
        ((300, 17, 20), (1, 2)),
        ((8, 40), (1,)),
    ],
)
def test_sums_over_trailing_dims_match_numpy(shape: tuple, dims: tuple) -> None:
    """Sums whose reduced dims include the last ones (a conv bias gradient, spatial means) add
    each trailing run on its own, rows shared among threads; float64 NumPy is the truth."""
    x = np.random.default_rng(9).standard_normal(shape)
    for dtype, tol in ((fg.float64, 1e-12), (fg.float32, 1e-5)):
        got = fg.tensor(x, dtype=dtype).sum(dim=dims, keepdim=True).numpy()
        want = x.sum(axis=dims, keepdims=True)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(x.size))
        mean = fg.tensor(x, dtype=dtype).mean(dim=dims).numpy()
        np.testing.assert_allclose(mean, x.mean(axis=dims), rtol=tol, atol=tol)
