"""How much of torch's everyday API ferrograd has: two curated lists, Tensor methods and
top-level functions that everyday torch code uses (from torch's "Tensor" and "torch" docs
pages: creation, indexing/slicing/joining, math, reductions, comparison, random, in-place
forms, conversions). Every listed name must exist on ``ferrograd.Tensor`` / ``ferrograd``
except those in ``KNOWN_MISSING``, which may only shrink: a name that starts to exist fails the
test until it leaves the set. With torch installed every listed name must exist in torch too,
so the lists stay true. ``pytest -s`` prints the counts."""

from __future__ import annotations

import ferrograd as fg
import pytest

try:
    import torch
except ImportError:  # torch is optional
    torch = None

TENSOR_METHODS = """
new_tensor new_zeros new_ones new_full new_empty clone detach detach_ contiguous to cpu cuda
numpy tolist item float double long int bool half type type_as requires_grad_ retain_grad
backward register_hook zero_ fill_ copy_ data_ptr element_size is_contiguous is_floating_point
size dim ndimension numel nelement view view_as reshape reshape_as expand expand_as flatten
unflatten squeeze unsqueeze permute transpose t movedim narrow select split chunk unbind flip
roll repeat tile repeat_interleave index_select gather scatter scatter_ scatter_add scatter_add_
scatter_reduce scatter_reduce_ index_add index_add_ index_copy index_copy_ index_fill index_fill_
index_put index_put_ masked_fill masked_fill_ masked_select masked_scatter masked_scatter_ take
take_along_dim nonzero abs abs_ neg neg_ exp exp_ expm1 log log_ log1p log2 log10 sqrt sqrt_
rsqrt sin sin_ cos cos_ tan tanh tanh_ sigmoid sigmoid_ relu relu_ pow pow_ square square_
clamp clamp_ clip clip_ clamp_min clamp_max clamp_min_ clamp_max_ sign floor floor_ ceil ceil_
round round_ trunc frac reciprocal reciprocal_ erf erfinv lerp lerp_ addcmul addcmul_ addcdiv
addcdiv_ addmm addmv addbmm baddbmm mm bmm matmul mv dot outer add add_ sub sub_ mul mul_ div
div_ fmod fmod_ remainder remainder_ atan2 maximum minimum sum mean prod std var max min amax
amin argmax argmin norm logsumexp cumsum cumprod all any softmax log_softmax sort argsort topk
median mode kthvalue unique count_nonzero eq ne lt le gt ge isclose allclose equal isnan isinf
isfinite logical_not logical_and logical_or bitwise_not where diag diagonal tril triu trace
diff nan_to_num normal_ uniform_ random_ exponential_ bernoulli_ bernoulli multinomial
pin_memory unfold stride storage_offset argwhere cummax nanmean
""".split()

FUNCTIONS = """
tensor as_tensor from_numpy zeros ones full empty zeros_like ones_like full_like empty_like rand
randn randint rand_like randn_like randint_like randperm arange linspace logspace eye manual_seed
seed initial_seed get_default_dtype set_default_dtype is_tensor is_floating_point numel cat
concat stack hstack vstack dstack column_stack split chunk unbind reshape flatten squeeze
unsqueeze permute transpose t movedim narrow select flip roll tile repeat_interleave gather
scatter scatter_add scatter_reduce index_select index_add index_copy index_fill masked_select
masked_fill take take_along_dim nonzero where meshgrid broadcast_tensors broadcast_shapes
broadcast_to atleast_1d atleast_2d atleast_3d cartesian_prod combinations kron tensordot einsum
matmul mm bmm mv dot outer addmm addmv addbmm baddbmm abs neg exp expm1 log log1p log2 log10
sqrt rsqrt sin cos tan tanh sigmoid relu pow square clamp clip clamp_min clamp_max sign floor
ceil round trunc reciprocal erf erfinv lerp addcmul addcdiv add sub mul div fmod remainder atan2
maximum minimum sum mean prod std var max min amax amin argmax argmin norm logsumexp cumsum
cumprod all any softmax log_softmax sort argsort topk median mode kthvalue unique count_nonzero
quantile eq ne lt le gt ge isclose allclose equal isnan isinf isfinite logical_not logical_and
logical_or logical_xor diag diagonal tril triu trace diff nan_to_num no_grad enable_grad
set_grad_enabled is_grad_enabled inference_mode save load normal bernoulli multinomial std_mean
var_mean searchsorted bucketize histc bincount cdist cross det inverse logdet svd qr cholesky
clone detach dropout exp2 sinh cosh asin acos atan frac hypot logaddexp rot90 triu_indices
tril_indices block_diag argwhere nanmean nansum
""".split()

# Not done yet.
NOT_YET: set = set()

KNOWN_MISSING = NOT_YET


def _qualified() -> list:
    return [f"Tensor.{n}" for n in TENSOR_METHODS] + list(FUNCTIONS)


def _exists(lib, qualified: str) -> bool:
    if qualified.startswith("Tensor."):
        return hasattr(lib.Tensor, qualified.removeprefix("Tensor."))
    return hasattr(lib, qualified)


def test_lists_have_no_duplicates() -> None:
    assert len(set(TENSOR_METHODS)) == len(TENSOR_METHODS)
    assert len(set(FUNCTIONS)) == len(FUNCTIONS)
    assert KNOWN_MISSING <= set(_qualified()), KNOWN_MISSING - set(_qualified())


def test_every_listed_name_exists_in_ferrograd_unless_known_missing() -> None:
    missing = {q for q in _qualified() if not _exists(fg, q)}
    assert missing <= KNOWN_MISSING, f"missing and not listed: {sorted(missing - KNOWN_MISSING)}"
    now_present = sorted(KNOWN_MISSING - missing)
    assert not now_present, f"present now, remove from KNOWN_MISSING: {now_present}"
    for label, names, prefix in (
        ("Tensor", TENSOR_METHODS, "Tensor."),
        ("ferrograd", FUNCTIONS, ""),
    ):
        have = sum(1 for n in names if prefix + n not in missing)
        print(f"\n{label}: {have} of {len(names)} ({100 * have / len(names):.0f}%)")


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_every_listed_name_exists_in_torch() -> None:
    absent = [q for q in _qualified() if not _exists(torch, q)]
    assert not absent, f"not in torch: {absent}"
