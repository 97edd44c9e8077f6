"""``zeros_like``/``ones_like``/``full_like``/``empty_like`` inside ``vmap`` are batched like
their input (torch's rule), so they hold one value per sample."""

from __future__ import annotations

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.func import grad, vmap


@pytest.mark.parametrize(
    "make, value",
    [
        (lambda x: fg.zeros_like(x), 0.0),
        (lambda x: fg.ones_like(x), 1.0),
        (lambda x: fg.full_like(x, 2.5), 2.5),
        (lambda x: fg.empty_like(x) * 0.0, 0.0),
    ],
)
def test_like_factories_are_batched_per_sample(make, value) -> None:  # type: ignore[no-untyped-def]
    xs = fg.arange(6.0).reshape(2, 3)

    def body(x):  # type: ignore[no-untyped-def]
        out = make(x)
        assert fg._C.is_batchedtensor(out) and tuple(out.shape) == (3,)
        return out + x

    np.testing.assert_array_equal(vmap(body)(xs).numpy(), xs.numpy() + value)
    # nested vmap: batched at both levels
    got = vmap(vmap(lambda x: make(x) + x))(xs)
    np.testing.assert_array_equal(got.numpy(), xs.numpy() + value)


def test_a_gradient_against_a_like_tensor_stays_per_sample() -> None:
    """d/dz sum((x + z)²) at z = 0 is 2x per sample; an unbatched z would sum the samples."""

    def per_sample(x):  # type: ignore[no-untyped-def]
        return grad(lambda z: ((x + z) ** 2).sum())(fg.zeros_like(x))

    xs = fg.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=fg.float64)
    np.testing.assert_allclose(vmap(per_sample)(xs).numpy(), 2 * xs.numpy())


def test_writing_a_sample_into_a_like_tensor_works_as_in_torch() -> None:
    """The common ``out = zeros_like(x); out += ...; out[i] = ...`` inside vmap: batched values
    go into a batched buffer (an unbatched one would be torch's in-place error)."""

    def body(x):  # type: ignore[no-untyped-def]
        out = fg.zeros_like(x)
        out += x * 2
        out[0] = 5.0
        return out

    xs = fg.arange(6.0).reshape(2, 3)
    want = xs.numpy() * 2
    want[:, 0] = 5.0
    np.testing.assert_array_equal(vmap(body)(xs).numpy(), want)
