"""autocast and GradScaler: CPU autocast against explicit casts (the definition of what it
does) and torch when installed; GradScaler's scale schedule against its closed form."""

from __future__ import annotations

import pickle
import warnings

import ferrograd as fg
import numpy as np
import pytest

F = fg.nn.functional
RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def same(a, b):
    """Bitwise-equal values and the same dtype."""
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_array_equal(a.float().detach().numpy(), b.float().detach().numpy())


# ----- which ops cast, and to what --------------------------------------------------------


def lower_cases(lib=fg):
    R = np.random.default_rng(1)

    def t(*shape):
        return lib.tensor(R.standard_normal(shape).astype(np.float32))

    G = lib.nn.functional
    x, w, b = t(4, 5), t(3, 5), t(3)
    a3, b3 = t(2, 4, 5), t(2, 5, 3)
    img, k = t(2, 3, 8, 8), t(4, 3, 3, 3)
    q = t(2, 2, 6, 4)
    c, z = t(4, 3), t(2, 4, 3)
    return [
        ("linear", lambda x, w, b: G.linear(x, w, b), (x, w, b)),
        ("matmul", lambda x, w: x @ w.t(), (x, w)),
        ("lib.matmul", lambda x, w: lib.matmul(x, w.t()), (x, w)),
        ("mm", lambda x, w: x.mm(w.t()), (x, w)),
        ("bmm", lambda a, b: lib.bmm(a, b), (a3, b3)),
        ("addmm", lambda c, x, w: lib.addmm(c, x, w.t()), (c, x, w)),
        ("baddbmm", lambda z, a, b: lib.baddbmm(z, a, b), (z, a3, b3)),
        ("conv2d", lambda i, k: G.conv2d(i, k, padding=1), (img, k)),
        ("sdpa", lambda q: G.scaled_dot_product_attention(q, q, q), (q,)),
        ("sdpa_mask", lambda q, m: G.scaled_dot_product_attention(q, q, q, m), (q, t(6, 6))),
        ("conv1d", lambda i, k: G.conv1d(i, k, bias=None), (t(2, 3, 9), t(4, 3, 3))),
        (
            "conv_transpose2d",
            lambda i, k, b: G.conv_transpose2d(i, k, b),
            (img, t(3, 2, 3, 3), t(2)),
        ),
        ("prelu", lambda i, a: G.prelu(i, a), (img, t(3))),
    ]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", lower_cases(), ids=lambda c: c[0])
def test_lower_precision_ops_run_on_operands_cast_to_the_autocast_dtype(case, dtype):
    _, f, args = case
    dt = getattr(fg, dtype)
    want = f(*[a.to(dt) for a in args])
    with fg.autocast("cpu", dtype=dt):
        got = f(*args)
    assert want.dtype == dt
    same(got, want)
    # Outside the region, float32 again.
    assert f(*args).dtype == fg.float32


def test_modules_run_in_bfloat16_and_their_gradients_reach_the_float32_weights():
    fg.manual_seed(0)
    net = fg.nn.Sequential(fg.nn.Linear(5, 8), fg.nn.ReLU(), fg.nn.Linear(8, 2))
    x = fg.tensor(arr(6, 5))
    with fg.autocast("cpu"):
        out = net(x)
        loss = F.cross_entropy(out, fg.tensor([0, 1, 0, 1, 1, 0]))
    assert out.dtype == fg.bfloat16 and loss.dtype == fg.float32
    loss.backward()
    # The same computation written with explicit casts gives the same gradients.
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    w1, b1, w2, b2 = [p.to(fg.bfloat16) for p in net.parameters()]
    h = F.relu(F.linear(x.to(fg.bfloat16), w1, b1))
    F.cross_entropy(F.linear(h, w2, b2).float(), fg.tensor([0, 1, 0, 1, 1, 0])).backward()
    for g, p in zip(grads, net.parameters()):
        assert g.dtype == fg.float32
        same(g, p.grad)


def test_float32_ops_run_on_float32_operands():
    a = fg.tensor(arr(4, 3)).to(fg.bfloat16)
    t = fg.tensor(arr(4, 3)).to(fg.bfloat16)
    with fg.autocast("cpu"):
        mse = F.mse_loss(a, t)
        bce = F.binary_cross_entropy_with_logits(a, t.sigmoid())
        ce = F.cross_entropy(a, fg.tensor([0, 2, 1, 0]))
        d = fg.cdist(a, t)
    for r in (mse, bce, ce, d):
        assert r.dtype == fg.float32
    same(mse, F.mse_loss(a.float(), t.float()))
    same(ce, F.cross_entropy(a.float(), fg.tensor([0, 2, 1, 0])))


def test_float64_and_integer_tensors_are_never_cast():
    x = fg.tensor(arr(3, 3)).double()
    with fg.autocast("cpu"):
        assert (x @ x).dtype == fg.float64
        assert F.linear(x, x).dtype == fg.float64
        i = fg.arange(4).reshape(2, 2)
        assert (i @ i).dtype == fg.int64


def test_state_nests_and_is_restored_on_exit_and_on_error():
    assert not fg.is_autocast_enabled("cpu")
    x = fg.tensor(arr(2, 2))
    with fg.autocast("cpu"):
        with fg.autocast("cpu", enabled=False):
            assert not fg.is_autocast_enabled("cpu")
            assert (x @ x).dtype == fg.float32
        assert fg.is_autocast_enabled("cpu")
        with fg.autocast("cpu", dtype=fg.float16):
            assert (x @ x).dtype == fg.float16
        assert fg.get_autocast_dtype("cpu") == fg.bfloat16
    with pytest.raises(KeyError):
        with fg.autocast("cpu"):
            raise KeyError("boom")
    assert not fg.is_autocast_enabled("cpu")
    assert fg.get_autocast_dtype("cpu") == fg.bfloat16


def test_decorator_form():
    @fg.autocast("cpu")
    def f(a):
        return a @ a

    assert f(fg.tensor(arr(2, 2))).dtype == fg.bfloat16
    assert not fg.is_autocast_enabled("cpu")


def test_weight_casts_are_cached_within_a_region_and_dropped_after():
    w = fg.nn.Parameter(fg.tensor(arr(3, 3)))
    x = fg.tensor(arr(3, 3))
    with fg.autocast("cpu"):
        a, b = fg._C._autocast_cast([w], False)[0], fg._C._autocast_cast([w], False)[0]
        assert a is b
        # Not for activations (non-leaves) or tensors without grad.
        assert fg._C._autocast_cast([x], False)[0] is not fg._C._autocast_cast([x], False)[0]
    with fg.autocast("cpu"):
        c = fg._C._autocast_cast([w], False)[0]
    assert c is not a
    with fg.autocast("cpu", cache_enabled=False):
        assert fg._C._autocast_cast([w], False)[0] is not fg._C._autocast_cast([w], False)[0]


def test_bad_arguments_and_unavailable_devices():
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        fg.autocast(0)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        fg.autocast("tpu")
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        ac = fg.autocast("cpu", dtype=fg.float32)
    with ac:
        assert not fg.is_autocast_enabled("cpu")
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling"):
        ac = fg.autocast("cuda")
    with ac:
        assert not fg.is_autocast_enabled("cuda") and not fg.is_autocast_enabled("cpu")
    with pytest.warns(FutureWarning, match="torch.cuda.amp.autocast"):
        fg.cuda.amp.autocast()
    with pytest.warns(FutureWarning, match="torch.cpu.amp.autocast"):
        ac = fg.cpu.amp.autocast()
    with ac:
        assert fg.is_autocast_enabled("cpu")
    with pytest.warns(FutureWarning, match="torch.cpu.amp.GradScaler"):
        assert fg.cpu.amp.GradScaler().is_enabled()


def test_custom_fwd_casts_inputs_and_custom_bwd_runs_in_the_forward_state():
    seen = {}

    class Square(fg.autograd.Function):
        @staticmethod
        @fg.amp.custom_fwd(device_type="cpu", cast_inputs=fg.float32)
        def forward(ctx, x):
            seen["fwd"] = (x.dtype, fg.is_autocast_enabled("cpu"))
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @fg.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = fg.is_autocast_enabled("cpu")
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = fg.tensor(arr(3)).to(fg.bfloat16).requires_grad_()
    with fg.autocast("cpu"):
        y = Square.apply(x)
    y.sum().backward()
    assert seen == {"fwd": (fg.float32, False), "bwd": False}
    assert x.grad.dtype == fg.bfloat16
    same(x.grad, (2 * x.detach().float()).to(fg.bfloat16))


# ----- GradScaler ----------------------------------------------------------------------


def scaler_loop(lib, steps, inf_at, growth_interval=3):
    """SGD on a quadratic with a scaler; `inf_at` steps get an inf gradient. Returns the
    scales seen and the final parameter."""
    p = lib.nn.Parameter(lib.tensor(np.array([1.0, -2.0], dtype=np.float32)))
    opt = lib.optim.SGD([p], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=growth_interval)
    scales = []
    for i in range(steps):
        opt.zero_grad()
        loss = (p * p).sum()
        scaler.scale(loss).backward()
        if i in inf_at:
            p.grad[0] = float("inf")
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, p.detach().numpy().copy()


def test_grad_scaler_schedule_and_skipped_steps_match_the_closed_form():
    scales, p = scaler_loop(fg, 9, {1, 5})
    # Backoff halves on an inf step and resets the tracker; three clean steps double.
    assert scales == [8.0, 4.0, 4.0, 4.0, 8.0, 4.0, 4.0, 4.0, 8.0]
    # Seven clean SGD steps of p <- p - 0.1 * 2p (the gradient unscaled exactly).
    np.testing.assert_allclose(p, np.array([1.0, -2.0]) * 0.8**7, rtol=1e-6)


def test_grad_scaler_against_torch():
    torch = pytest.importorskip("torch")
    ours = scaler_loop(fg, 12, {0, 4, 5})
    theirs = scaler_loop(torch, 12, {0, 4, 5})
    assert ours[0] == theirs[0]
    np.testing.assert_array_equal(ours[1], theirs[1])


def test_unscale_then_clip_then_step():
    p = fg.nn.Parameter(fg.tensor(np.array([3.0, 4.0], dtype=np.float32)))
    opt = fg.optim.SGD([p], lr=1.0)
    scaler = fg.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale((p * p).sum() / 2).backward()
    scaler.unscale_(opt)
    np.testing.assert_allclose(p.grad.numpy(), [3.0, 4.0])
    fg.nn.utils.clip_grad_norm_([p], 1.0)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(p.detach().numpy(), [3.0 - 0.6, 4.0 - 0.8], rtol=1e-5)


def test_grad_scaler_misuse_raises_torchs_errors():
    p = fg.nn.Parameter(fg.ones(2))
    opt = fg.optim.SGD([p], lr=0.1)
    scaler = fg.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted step but _scale is None"):
        scaler.step(opt)
    scaler.scale(p.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step\\(\\)"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0.0)
    with pytest.raises(ValueError, match="outputs must be a Tensor"):
        scaler.scale([1.0])
    with pytest.raises(AssertionError, match="growth factor must be > 1.0"):
        fg.amp.GradScaler("cpu", growth_factor=1.0)


def test_grad_scaler_scales_nested_outputs_and_round_trips_its_state():
    scaler = fg.amp.GradScaler("cpu", init_scale=4.0)
    a, b = fg.ones(2), fg.full((1,), 2.0)
    out = scaler.scale([a, (b,)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    np.testing.assert_array_equal(out[1][0].numpy(), [8.0])
    sd = scaler.state_dict()
    assert sd == {
        "scale": 4.0,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 2000,
        "_growth_tracker": 0,
    }
    other = fg.amp.GradScaler("cpu")
    other.load_state_dict({**sd, "scale": 32.0, "_growth_tracker": 5})
    assert other.get_scale() == 32.0 and other._get_growth_tracker() == 5
    clone = pickle.loads(pickle.dumps(other))
    assert clone.get_scale() == 32.0
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        other.load_state_dict({})


def test_cuda_grad_scaler_disables_itself_and_passes_through():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = fg.cuda.amp.GradScaler()
    messages = [str(w.message) for w in caught]
    assert any("torch.amp.GradScaler('cuda', args...)" in m for m in messages)
    assert (
        "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling." in messages
    )
    p = fg.nn.Parameter(fg.ones(2))
    opt = fg.optim.SGD([p], lr=0.5)
    loss = (p * p).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {} and not scaler.is_enabled()


def amp_recipe(use_amp):
    # torch's "Automatic Mixed Precision" recipe as written, the device set to "cpu" and
    # bfloat16; a learnable target so the loss has somewhere to go.
    torch = fg
    device = "cpu"
    torch.manual_seed(0)
    w_true = torch.randn(32, 8) / 4
    data = [torch.randn(64, 32, device=device) for _ in range(4)]
    targets = [x @ w_true for x in data]
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(
        device
    )
    loss_fn = torch.nn.MSELoss().cuda() if torch.cuda.is_available() else torch.nn.MSELoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, enabled=use_amp)
    losses = []
    for _epoch in range(20):
        for input, target in zip(data, targets):
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=use_amp):
                output = net(input)
                assert output.dtype is (torch.bfloat16 if use_amp else torch.float32)
                loss = loss_fn(output, target)
                assert loss.dtype is torch.float32
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            losses.append(loss.item())
    return np.array(losses)


def test_the_amp_recipe_runs_as_written_and_trains_like_float32():
    mixed, full = amp_recipe(True), amp_recipe(False)
    assert full[-1] < 0.2 * full[0]
    # bfloat16 keeps 8 bits: the trajectory follows float32's within a few percent.
    np.testing.assert_allclose(mixed, full, rtol=0.02)


# ----- torch parity of the dtype decisions -------------------------------------------------


def test_output_dtypes_and_values_match_torch_autocast():
    torch = pytest.importorskip("torch")
    for (name, f, args), (_, tf, targs) in zip(lower_cases(fg), lower_cases(torch)):
        with fg.autocast("cpu"):
            ours = f(*args)
        with torch.autocast("cpu"):
            theirs = tf(*targs)
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], name
        np.testing.assert_allclose(
            ours.float().numpy(), theirs.float().numpy(), rtol=2e-2, atol=2e-2, err_msg=name
        )
