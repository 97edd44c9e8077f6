"""Every op of ``optables/*`` under ``vmap``, against the definition of vmap: the op applied to
each sample in a Python loop, the results stacked.

For each entry and shape set, three samples of every tensor input are drawn and checked with
the batch dimension first everywhere ("all0"), last on the first tensor input ("last"), and on
the first tensor input only with the others shared by all samples ("mix"); then the gradient
form, ``vmap(grad(loss))`` against ``autograd.grad`` sample by sample, puts each backward rule
through batched gradients.

Ops without a batching rule yet are listed in ``vmap_no_rule.txt``; for them the test asserts
the clear error instead. The list may only shrink: an op that starts working fails here until
its line is removed.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any, Callable, List, Optional, Tuple

import ferrograd as fg
import numpy as np
import pytest
from optables.spec import Arg, OpSpec
from test_op_table import SPECS, _float_outputs, _make_arrays, _outputs

B = 3
NO_RULE_FILE = pathlib.Path(__file__).with_name("vmap_no_rule.txt")
NO_RULE = {
    line.split("#")[0].strip()
    for line in NO_RULE_FILE.read_text().splitlines()
    if line.split("#")[0].strip()
}
MODES = ("all0", "last", "mix")
# Entries that draw random numbers: vmap's default randomness="error" refuses them, as torch's.
RANDOM = {"nn_dropout_seeded"}
# Entries torch's vmap refuses in some modes: the modes, and (part of) torch's message.
REFUSED = {
    "nonzero": (MODES, "can output dynamic shape"),
    "nonzero_tuple": (MODES, "can output dynamic shape"),
    "repeat_interleave_counts": (MODES, "requires the `output_size` argument"),
    # The running statistics, shared by the samples, would be updated once per sample.
    "nn_norm_batch_norm_train_running": (("mix",), "running_var, which will be updated in place"),
}

CASES = [
    pytest.param(spec, i, mode, id=f"{spec.name}-{i}-{mode}")
    for spec in SPECS
    for i in range(len(spec.all_arg_sets()))
    for mode in MODES
]
GRAD_CASES = [
    pytest.param(spec, i, id=f"{spec.name}-{i}")
    for spec in SPECS
    if spec.grad
    for i in range(len(spec.all_arg_sets()))
]


def _tensor_positions(args: List[Arg]) -> List[int]:
    return [k for k, a in enumerate(args) if a.kind != "const"]


def _sample_tensor(arr: Any, a: Arg, dtype: Any = fg.float64) -> Any:
    if a.kind == "float":
        return fg.tensor(np.array(arr), dtype=dtype)
    return fg.tensor(np.array(arr))


def _samples(args: List[Arg], case: int, dtype: Any = fg.float64) -> List[List[Any]]:
    """B draws of the inputs (consts are those of the first draw), float ones as `dtype`."""
    draws = [_make_arrays(args, seed=100 * case + b) for b in range(B)]
    return [
        [arr if a.kind == "const" else _sample_tensor(arr, a, dtype) for arr, a in zip(d, args)]
        for d in draws
    ]


def _batched_inputs(
    args: List[Arg], samples: List[List[Any]], mode: str
) -> Tuple[List[Any], Tuple[Optional[int], ...], List[List[Any]]]:
    """The stacked inputs, their in_dims, and the per-sample inputs the loop must use."""
    tpos = _tensor_positions(args)
    first = tpos[0] if tpos else None
    inputs: List[Any] = []
    in_dims: List[Optional[int]] = []
    loop = [list(s) for s in samples]
    for k, a in enumerate(args):
        if a.kind == "const":
            inputs.append(samples[0][k])
            in_dims.append(None)
            continue
        stacked = fg.stack([s[k] for s in samples])
        if mode == "mix" and k != first:
            inputs.append(samples[0][k])
            in_dims.append(None)
            for s in loop:
                s[k] = samples[0][k]
        elif mode == "last" and k == first and stacked.dim() > 1:
            inputs.append(stacked.movedim(0, -1).contiguous())
            in_dims.append(-1)
        else:
            inputs.append(stacked)
            in_dims.append(0)
    return inputs, tuple(in_dims), loop


def _expect_random_refused(run: Callable[[], Any]) -> None:
    with pytest.raises(RuntimeError, match="randomness error mode"):
        run()


def _is_no_rule(err: Exception) -> bool:
    return isinstance(err, RuntimeError) and "no batching rule" in str(err)


def _check_listed(run: Callable[[], Any]) -> Optional[Any]:
    """Run a listed op, which may fail with the no-rule error (None is returned then); a
    result is checked as any other."""
    try:
        return run()
    except RuntimeError as err:
        if not _is_no_rule(err):
            raise
        return None


def _assert_close(got: Any, want: Any, spec: OpSpec) -> None:
    g = np.asarray(got.detach().numpy())
    w = np.asarray(want.detach().numpy())
    assert g.shape == w.shape
    if spec.exact or g.dtype == bool or np.issubdtype(g.dtype, np.integer):
        np.testing.assert_array_equal(g, w)
    elif g.dtype == np.float32:
        # The batch may take other kernels or orders of summation than one sample, and some
        # entries are ill-conditioned (group_norm over groups of two elements loses three
        # digits of float32 to cancellation): a mis-batched result is off by O(1) instead.
        scale = float(np.nanmax(np.abs(w), initial=1.0)) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * scale)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("spec,case,mode", CASES)
def test_vmap_matches_a_loop_over_samples(spec: OpSpec, case: int, mode: str) -> None:
    args = spec.all_arg_sets()[case]
    if not _tensor_positions(args):
        pytest.skip("no tensor input to map over")
    samples = _samples(args, case)
    inputs, in_dims, loop = _batched_inputs(args, samples, mode)
    with fg.no_grad():
        want = [_outputs(spec.fn(fg, *s)) for s in loop]

    def run() -> Any:
        with fg.no_grad():
            return fg.vmap(lambda *a: spec.fn(fg, *a), in_dims=in_dims)(*inputs)

    if spec.name in RANDOM:
        _expect_random_refused(run)
        return
    if mode in REFUSED.get(spec.name, ((), ""))[0]:
        with pytest.raises(RuntimeError, match=re.escape(REFUSED[spec.name][1])):
            run()
        return
    got = _check_listed(run) if spec.name in NO_RULE else run()
    if got is None:
        return
    got = _outputs(got)
    assert len(got) == len(want[0])
    for j, g in enumerate(got):
        _assert_close(g, fg.stack([w[j] for w in want]), spec)
        assert not fg._C.is_batchedtensor(g)


@pytest.mark.parametrize("spec,case", GRAD_CASES)
def test_vmap_of_grad_matches_per_sample_gradients(spec: OpSpec, case: int) -> None:
    _grad_case(spec, case, spec.name in NO_RULE)


@pytest.mark.parametrize("spec,case", GRAD_CASES)
def test_float32_kernels_under_vmap_match_per_sample_gradients(spec: OpSpec, case: int) -> None:
    # float32 takes the fused kernels (float64 often the element path), which read elements a
    # batched tensor does not have: each must run on the physical tensor or compose. The
    # gradient form checks the forward too.
    if spec.name in NO_RULE or spec.name in RANDOM:
        pytest.skip("listed: no batching rule, or random")
    _grad_case(spec, case, False, fg.float32)


def _grad_case(spec: OpSpec, case: int, listed: bool, dtype: Any = fg.float64) -> None:
    args = spec.all_arg_sets()[case]
    gpos = [k for k, a in enumerate(args) if a.kind == "float" and a.requires_grad]
    if not gpos:
        pytest.skip("no differentiable input")
    samples = _samples(args, case, dtype)
    inputs, in_dims, loop = _batched_inputs(args, samples, "all0")
    with fg.no_grad():
        outs0 = _float_outputs(spec.fn(fg, *loop[0]))
    if not outs0:
        pytest.skip("no float output to differentiate")
    rng = np.random.default_rng(case + 7)
    weights = [fg.tensor(rng.uniform(0.5, 1.5, size=tuple(o.shape)), dtype=o.dtype) for o in outs0]

    def loss(*vals: Any) -> Any:
        outs = _float_outputs(spec.fn(fg, *vals))
        return sum((o * w).sum() for o, w in zip(outs, weights))

    want = []
    for s in loop:
        xs = [v.detach().requires_grad_() if k in gpos else v for k, v in enumerate(s)]
        want.append(fg.autograd.grad(loss(*xs), [xs[k] for k in gpos], allow_unused=True))

    def run() -> Any:
        return fg.vmap(fg.func.grad(loss, argnums=tuple(gpos)), in_dims=in_dims)(*inputs)

    if spec.name in RANDOM:
        _expect_random_refused(run)
        return
    got = _check_listed(run) if listed else run()
    if got is None:
        return
    for j in range(len(gpos)):
        column = [w[j] if w[j] is not None else fg.zeros_like(loop[0][gpos[j]]) for w in want]
        _assert_close(got[j], fg.stack(column), spec)


@pytest.mark.parametrize("name", sorted(NO_RULE))
def test_the_no_rule_list_only_names_ops_that_still_lack_a_rule(name: str) -> None:
    specs = [s for s in SPECS if s.name == name]
    assert specs, f"{name} in {NO_RULE_FILE.name} is no op-table entry"
    spec = specs[0]
    args = spec.args
    samples = _samples(args, 0)
    for mode in MODES:
        inputs, in_dims, _ = _batched_inputs(args, samples, mode)
        try:
            with fg.no_grad():
                fg.vmap(lambda *a: spec.fn(fg, *a), in_dims=in_dims)(*inputs)
        except RuntimeError as err:
            if _is_no_rule(err):
                return
    if spec.grad:
        try:
            _grad_case(spec, 0, False)
        except RuntimeError as err:
            if _is_no_rule(err):
                return
    pytest.fail(f"{name} works under vmap now: remove it from {NO_RULE_FILE.name}")


@pytest.mark.parametrize("spec,case", GRAD_CASES)
def test_batched_jacfwd_matches_the_column_loop(spec: OpSpec, case: int) -> None:
    """jacfwd pushes the whole one-hot basis through each op's forward rule at once (batched
    tangents); the column loop pushes one basis vector per pass."""
    from ferrograd.func import _forward

    args = spec.all_arg_sets()[case]
    gpos = [k for k, a in enumerate(args) if a.kind == "float" and a.requires_grad]
    if not gpos:
        pytest.skip("no differentiable input")
    vals = _samples(args, case)[0]
    k0 = gpos[0]

    def f(x: Any) -> Any:
        full = list(vals)
        full[k0] = x
        outs = _float_outputs(spec.fn(fg, *full))
        return tuple(outs)

    results = []
    for batched in (True, False):
        _forward._BATCHED[0] = batched
        try:
            results.append(fg.func.jacfwd(f)(vals[k0]))
        except Exception as err:  # noqa: BLE001 - both forms must fail alike
            results.append(type(err))
        finally:
            _forward._BATCHED[0] = True
    got, want = results
    if spec.name in RANDOM:
        # random: jacfwd's default randomness="error" refuses it batched, as torch's does
        assert got is RuntimeError
        return
    if isinstance(want, type):
        assert got is want
        return
    assert not isinstance(got, type), got
    for g, w in zip(got, want):
        _assert_close(g, w, spec)
