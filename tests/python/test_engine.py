"""Backward engine: determinism across thread counts, deep graphs, concurrency, Python nodes."""

import gc
import math
import os
import re
import threading
import time
import weakref

import ferrograd as fg
import numpy as np
import numpy.testing as npt
import pytest

ERR_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed)."
)
THREAD_TIMEOUT = 60.0
N_BRANCHES = 16
SIZE = 64


@pytest.fixture(autouse=True)
def _restore_num_threads():
    before = fg.get_num_threads()
    yield
    fg.set_num_threads(before)


def npv(t):
    return t.detach().numpy()


def run_with_timeout(fn, timeout=THREAD_TIMEOUT):
    """Run fn in a daemon thread; fail (instead of hanging) if it does not finish in time."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller
            result["error"] = exc

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        pytest.fail(f"backward did not finish within {timeout}s (deadlock?)")
    if "error" in result:
        raise result["error"]
    return result.get("value")


def run_in_threads(worker, n_threads):
    """Run worker(tid) on n daemon threads started together; fail on a hang or any error."""
    barrier = threading.Barrier(n_threads)
    errors = []

    def target(tid):
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            worker(tid)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append((tid, exc))

    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(THREAD_TIMEOUT)
    assert not any(th.is_alive() for th in threads), "a thread hung"
    assert not errors, errors


@pytest.fixture
def wide_data():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((SIZE, SIZE)) * 0.3).astype(np.float32)
    ws = [(rng.standard_normal((SIZE, SIZE)) * 0.2).astype(np.float32) for _ in range(N_BRANCHES)]
    return x, ws


def wide_grads(x_np, ws_np, branch=None):
    """16 branches of tanh(x @ W_i), summed; returns the leaf grads as numpy arrays."""
    x = fg.tensor(x_np, requires_grad=True)
    ws = [fg.tensor(w, requires_grad=True) for w in ws_np]
    branch = branch or (lambda a, w: (a @ w).tanh())
    out = branch(x, ws[0])
    for w in ws[1:]:
        out = out + branch(x, w)
    out.sum().backward()
    return np.array(x.grad.numpy(), copy=True), [np.array(w.grad.numpy(), copy=True) for w in ws]


def wide_grads_reference(x_np, ws_np):
    x = x_np.astype(np.float64)
    gx = np.zeros_like(x)
    gws = []
    for w in ws_np:
        w = w.astype(np.float64)
        d = 1.0 - np.tanh(x @ w) ** 2
        gx += d @ w.T
        gws.append(x.T @ d)
    return gx, gws


# --------------------------------------------------------------------------------------------
# threads setting and determinism
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_set_num_threads_round_trips(n):
    fg.set_num_threads(n)
    assert fg.get_num_threads() == n


def test_wide_graph_grads_match_reference(wide_data):
    x_np, ws_np = wide_data
    gx, gws = wide_grads(x_np, ws_np)
    ref_x, ref_ws = wide_grads_reference(x_np, ws_np)
    npt.assert_allclose(gx, ref_x, rtol=1e-4, atol=1e-4)
    for got, ref in zip(gws, ref_ws):
        npt.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_wide_graph_grads_bitwise_identical_for_one_and_two_threads(wide_data):
    x_np, ws_np = wide_data
    runs = []
    for n_threads in (1, 2):
        fg.set_num_threads(n_threads)
        for _ in range(5):
            runs.append(wide_grads(x_np, ws_np))
    first_x, first_ws = runs[0]
    for gx, gws in runs[1:]:
        assert gx.tobytes() == first_x.tobytes()
        for got, ref in zip(gws, first_ws):
            assert got.tobytes() == ref.tobytes()


def _child_checks(x_np, ws_np):
    """Parallel backward, matmul, elementwise and sum, against numpy."""
    gx, gws = wide_grads(x_np, ws_np)
    ref_x, ref_ws = wide_grads_reference(x_np, ws_np)
    npt.assert_allclose(gx, ref_x, rtol=1e-4, atol=1e-4)
    for got, ref in zip(gws, ref_ws):
        npt.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    # Branches big enough for the engine to run them on the pool.
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((384, 384)) * 0.05).astype(np.float32)
    ws = [(rng.standard_normal((384, 384)) * 0.05).astype(np.float32) for _ in range(4)]
    x = fg.tensor(a, requires_grad=True)
    sum((x @ fg.tensor(w)).tanh().sum() for w in ws).backward()
    a64 = a.astype(np.float64)
    ref = sum((1 - np.tanh(a64 @ w) ** 2) @ w.T.astype(np.float64) for w in ws)
    npt.assert_allclose(npv(x.grad), ref, rtol=1e-3, atol=1e-4)
    v = rng.standard_normal(1 << 20).astype(np.float32)
    e = fg.tensor(v).exp()
    npt.assert_allclose(npv(e), np.exp(v.astype(np.float64)), rtol=1e-6)
    npt.assert_allclose(float(e.sum()), np.exp(v.astype(np.float64)).sum(), rtol=1e-5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_runs_parallel_work(wide_data):
    # The parent's pool threads (and helpers lingering after a kernel) do not exist in a forked
    # child (multiprocessing's fork start method, DataLoader workers); work queued for them
    # hung the child before it got a fresh pool.
    x_np, ws_np = wide_data
    fg.set_num_threads(2)
    _child_checks(x_np, ws_np)  # the parent's pool is running, helpers lingering
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            os.close(read_end)
            _child_checks(x_np, ws_np)
            status = 0
        finally:
            os.write(write_end, bytes([status]))
            os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + THREAD_TIMEOUT
    while True:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("forked child hung on parallel work")
        time.sleep(0.02)
    reported = os.read(read_end, 1)
    os.close(read_end)
    assert reported == b"\x00" and os.waitstatus_to_exitcode(code) == 0


# --------------------------------------------------------------------------------------------
# deep graphs
# --------------------------------------------------------------------------------------------

CHAIN_LEN = 100_000


class Marker:
    pass


def chain_with_marker(x, refs, length=CHAIN_LEN):
    """x -> Tag (holds a Marker in its ctx) -> `length` multiplications."""

    class Tag(fg.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.marker = Marker()
            refs.append(weakref.ref(ctx.marker))
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            return g

    y = Tag.apply(x)
    for _ in range(length):
        y = y * 1.00001
    return y


def test_long_chain_backward_works_and_chain_is_freed():
    x = fg.tensor(1.0, dtype=fg.float64, requires_grad=True)
    refs = []
    y = chain_with_marker(x, refs)
    npt.assert_allclose(y.item(), math.pow(1.00001, CHAIN_LEN), rtol=1e-9)
    y.backward()
    npt.assert_allclose(x.grad.item(), math.pow(1.00001, CHAIN_LEN), rtol=1e-9)
    with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE)):
        y.backward()
    del y
    gc.collect()
    assert refs[0]() is None, "graph of the chain is still alive after the root was dropped"


def test_long_chain_dropped_without_backward_is_freed():
    x = fg.tensor(1.0, dtype=fg.float64, requires_grad=True)
    refs = []
    y = chain_with_marker(x, refs)
    assert refs[0]() is not None
    del y
    gc.collect()
    assert refs[0]() is None
    assert x.grad is None


def test_long_chain_autograd_grad_works():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    y = x
    for _ in range(CHAIN_LEN):
        y = y + 0.5
    (g,) = fg.autograd.grad(y.sum(), x)
    npt.assert_array_equal(npv(g), [1.0, 1.0])
    npt.assert_allclose(npv(y), [1.0 + CHAIN_LEN / 2, 2.0 + CHAIN_LEN / 2])


# --------------------------------------------------------------------------------------------
# concurrency
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine_threads", [1, 2])
def test_backward_from_four_python_threads_on_independent_graphs(engine_threads):
    fg.set_num_threads(engine_threads)

    def worker(tid):
        rng = np.random.default_rng(tid)
        for _ in range(20):
            a = rng.standard_normal((8, 8))
            w_np = rng.standard_normal((8, 8))
            x = fg.tensor(a, requires_grad=True)
            w = fg.tensor(w_np, requires_grad=True)
            (x @ w).tanh().sum().backward()
            d = 1.0 - np.tanh(a @ w_np) ** 2
            npt.assert_allclose(x.grad.numpy(), d @ w_np.T, rtol=1e-10, atol=1e-12)
            npt.assert_allclose(w.grad.numpy(), a.T @ d, rtol=1e-10, atol=1e-12)

    run_in_threads(worker, 4)


def test_parallel_kernels_and_backward_from_three_python_threads():
    # Products, elementwise ops and sums big enough to split across the pool, and backward
    # passes with branches heavy enough to be offered to other threads, from several threads
    # at once: helpers are shared, each call must still get exactly its own result.
    fg.set_num_threads(2)

    def worker(tid):
        rng = np.random.default_rng(100 + tid)
        for _ in range(4):
            a = (rng.standard_normal((256, 256)) * 0.1).astype(np.float32)
            ws = [(rng.standard_normal((256, 256)) * 0.1).astype(np.float32) for _ in range(3)]
            v = rng.standard_normal(300_000).astype(np.float32)
            x = fg.tensor(a, requires_grad=True)
            sum((x @ fg.tensor(w)).tanh().sum() for w in ws).backward()
            a64 = a.astype(np.float64)
            want = sum((1 - np.tanh(a64 @ w) ** 2) @ w.T.astype(np.float64) for w in ws)
            npt.assert_allclose(npv(x.grad), want, rtol=1e-3, atol=1e-4)
            e = fg.tensor(v).exp()
            npt.assert_allclose(npv(e), np.exp(v.astype(np.float64)), rtol=1e-6)
            npt.assert_allclose(float(e.sum()), np.exp(v.astype(np.float64)).sum(), rtol=1e-5)

    run_in_threads(worker, 3)


PYTANH_GRAD_MODES = []  # grad mode seen by each PyTanh.backward call
PYTANH_LOCK = threading.Lock()


class PyTanh(fg.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        y = a.tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        with PYTANH_LOCK:
            PYTANH_GRAD_MODES.append(fg.is_grad_enabled())
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_python_functions_in_wide_graph_do_not_deadlock(wide_data, n_threads):
    fg.set_num_threads(n_threads)
    x_np, ws_np = wide_data
    PYTANH_GRAD_MODES.clear()
    gx, gws = run_with_timeout(
        lambda: wide_grads(x_np, ws_np, branch=lambda a, w: PyTanh.apply(a @ w))
    )
    ref_x, ref_ws = wide_grads_reference(x_np, ws_np)
    npt.assert_allclose(gx, ref_x, rtol=1e-4, atol=1e-4)
    for got, ref in zip(gws, ref_ws):
        npt.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert PYTANH_GRAD_MODES == [False] * N_BRANCHES


def test_python_functions_on_worker_threads_see_create_graph_grad_mode(wide_data):
    fg.set_num_threads(2)
    x_np, ws_np = wide_data
    PYTANH_GRAD_MODES.clear()

    def run():
        x = fg.tensor(x_np, requires_grad=True)
        loss = sum(PyTanh.apply(x @ fg.tensor(w)) for w in ws_np).sum()
        with fg.no_grad():
            (g,) = fg.autograd.grad(loss, x, create_graph=True)
        return g

    g = run_with_timeout(run)
    assert g.requires_grad
    assert PYTANH_GRAD_MODES == [True] * N_BRANCHES


def test_python_functions_in_wide_graph_match_builtin_ops_bitwise(wide_data):
    fg.set_num_threads(2)
    x_np, ws_np = wide_data
    first = run_with_timeout(
        lambda: wide_grads(x_np, ws_np, branch=lambda a, w: PyTanh.apply(a @ w))
    )
    for _ in range(3):
        again = run_with_timeout(
            lambda: wide_grads(x_np, ws_np, branch=lambda a, w: PyTanh.apply(a @ w))
        )
        assert again[0].tobytes() == first[0].tobytes()


def test_tensor_hooks_in_wide_graph_fire_once_each(wide_data):
    fg.set_num_threads(2)
    x_np, ws_np = wide_data
    counts = [0] * N_BRANCHES
    lock = threading.Lock()

    def run():
        x = fg.tensor(x_np, requires_grad=True)
        out = None
        for i, w in enumerate(ws_np):
            h = x @ fg.tensor(w)

            def hook(g, i=i):
                with lock:
                    counts[i] += 1
                return g * 2

            h.register_hook(hook)
            b = h.tanh()
            out = b if out is None else out + b
        out.sum().backward()
        return x.grad.numpy()

    gx = run_with_timeout(run)
    assert counts == [1] * N_BRANCHES
    ref_x, _ = wide_grads_reference(x_np, ws_np)
    npt.assert_allclose(gx, 2 * ref_x, rtol=1e-4, atol=1e-4)


class BranchFailureError(Exception):
    pass


@pytest.mark.parametrize("n_threads", [1, 2])
def test_exception_in_function_in_wide_graph_propagates_and_next_backward_works(
    wide_data, n_threads
):
    fg.set_num_threads(n_threads)
    x_np, ws_np = wide_data

    class Failing(fg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1.0

        @staticmethod
        def backward(ctx, g):
            raise BranchFailureError("branch 7 failed")

    def branch_factory():
        counter = iter(range(N_BRANCHES))

        def branch(a, w):
            i = next(counter)
            h = (a @ w).tanh()
            return Failing.apply(h) if i == 7 else h

        return branch

    with pytest.raises(BranchFailureError, match="branch 7 failed"):
        run_with_timeout(lambda: wide_grads(x_np, ws_np, branch=branch_factory()))

    gx, gws = run_with_timeout(lambda: wide_grads(x_np, ws_np))
    ref_x, ref_ws = wide_grads_reference(x_np, ws_np)
    npt.assert_allclose(gx, ref_x, rtol=1e-4, atol=1e-4)
    npt.assert_allclose(gws[7], ref_ws[7], rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------------------------
# broadcast gradients and summed parts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "f, want",
    [
        (lambda t: t / 4, 0.25),
        (lambda t: t * 3, 3.0),
        (lambda t: 2 - t, -1.0),
        (lambda t: (t * 0.5) * 4, 2.0),
    ],
)
def test_scalar_rules_on_a_sums_gradient_return_writable_grads(f, want):
    # A sum's gradient is one value broadcast; scalar rules keep it that way internally, but
    # what grad(), retain_grad and .grad hand back is writable, as in torch.
    y = fg.ones(3, 4, requires_grad=True)
    (g,) = fg.autograd.grad(f(y).sum(), y)
    npt.assert_array_equal(npv(g), np.full((3, 4), want, np.float32))
    g.mul_(2)
    npt.assert_array_equal(npv(g), np.full((3, 4), 2 * want, np.float32))
    h = y * 1.0
    h.retain_grad()
    f(h).sum().backward()
    h.grad.add_(1)
    y.grad.add_(1)
    npt.assert_array_equal(npv(h.grad), np.full((3, 4), want + 1, np.float32))
    npt.assert_array_equal(npv(y.grad), np.full((3, 4), want + 1, np.float32))


@pytest.mark.parametrize("n", [1000, 300_000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_many_gradient_parts_sum_to_the_closed_form(n, dtype):
    # x reaches the loss along four paths (the engine sums their parts in one pass), one of
    # them through a scalar rule applied to a broadcast gradient.
    xv = np.random.default_rng(5).uniform(-2, 2, n).astype(dtype)
    x = fg.tensor(xv, requires_grad=True)
    (x.sin() * x + x.exp() * 0.5 + x.tanh()).sum().backward()
    x64 = xv.astype(np.float64)
    want = np.sin(x64) + x64 * np.cos(x64) + 0.5 * np.exp(x64) + 1 - np.tanh(x64) ** 2
    tol = 1e-5 if dtype == np.float32 else 1e-12
    npt.assert_allclose(npv(x.grad), want, rtol=tol, atol=tol)
    # The same on any thread count, bit for bit.
    first = npv(x.grad).tobytes()
    fg.set_num_threads(1)
    x.grad = None
    (x.sin() * x + x.exp() * 0.5 + x.tanh()).sum().backward()
    assert npv(x.grad).tobytes() == first


# --------------------------------------------------------------------------------------------
# Rules that write their result over the gradient they were handed (when nothing else holds
# it): whatever a user can reach must keep its values.
# --------------------------------------------------------------------------------------------

CHAIN_X = np.array([0.3, -1.2, 0.7, 2.0, -0.1])


def _chain(x):
    """x -> y = 2x -> z = tanh(y) -> w = sin(z) -> v = exp(w) / 3, with every intermediate."""
    y = x * 2
    z = y.tanh()
    w = z.sin()
    v = w.exp() / 3
    return y, z, w, v


def _chain_grads_np(a):
    """dL/d(y, z, w, v) and dL/dx for L = sum(v), in float64."""
    y = 2 * a
    z = np.tanh(y)
    w = np.sin(z)
    gv = np.ones_like(a)
    gw = gv * np.exp(w) / 3
    gz = gw * np.cos(z)
    gy = gz * (1 - z * z)
    return {"y": gy, "z": gz, "w": gw, "v": gv, "x": 2 * gy}


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_gradients_held_by_hooks_keep_their_values(dtype):
    want = _chain_grads_np(CHAIN_X)
    x = fg.tensor(CHAIN_X, dtype=dtype, requires_grad=True)
    y, z, w, v = _chain(x)
    seen = {}
    for name, t in {"y": y, "z": z, "w": w, "v": v}.items():
        t.register_hook(lambda g, name=name: seen.__setitem__(name, g))
    v.sum().backward()
    tol = 1e-6 if dtype == fg.float32 else 1e-13
    for name in "vwzy":
        npt.assert_allclose(npv(seen[name]), want[name], rtol=tol, atol=tol)
    npt.assert_allclose(npv(x.grad), want["x"], rtol=tol, atol=tol)


def test_retained_gradients_and_captured_gradients_keep_their_values():
    want = _chain_grads_np(CHAIN_X)
    x = fg.tensor(CHAIN_X, dtype=fg.float64, requires_grad=True)
    y, z, w, v = _chain(x)
    for t in (y, z, w):
        t.retain_grad()
    v.sum().backward()
    for name, t in {"y": y, "z": z, "w": w}.items():
        npt.assert_allclose(npv(t.grad), want[name], rtol=1e-13)
    y, z, w, v = _chain(x)
    gz, gw, gx = fg.autograd.grad(v.sum(), (z, w, x))
    for name, g in {"z": gz, "w": gw, "x": gx}.items():
        npt.assert_allclose(npv(g), want[name], rtol=1e-13)


def test_gradient_given_to_backward_is_not_written_over():
    x = fg.tensor(CHAIN_X, dtype=fg.float64, requires_grad=True)
    _, _, _, v = _chain(x)
    seed = fg.full((5,), 2.0, dtype=fg.float64)
    v.backward(seed)
    npt.assert_array_equal(npv(seed), np.full(5, 2.0))
    npt.assert_allclose(npv(x.grad), 2 * _chain_grads_np(CHAIN_X)["x"], rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 70_000, 400_000])
def test_gradients_written_over_match_fresh_ones_bitwise(n, dtype):
    # A hook holding every intermediate's gradient makes each rule write a new tensor; without
    # hooks the rules write over the gradient. The bits must agree (sizes cover one chunk and
    # the threaded passes of the float32 vectorised and plain kernels).
    a = np.random.default_rng(1).standard_normal(n).astype(dtype)
    F = fg.nn.functional

    def grad(hold):
        x = fg.tensor(a, requires_grad=True)
        c = fg.tensor(np.cos(a), requires_grad=True)
        keep = []
        steps = [
            lambda t: t * 0.999,
            lambda t: t / 1.001,
            fg.Tensor.tanh,
            fg.Tensor.sin,
            fg.Tensor.cos,
            fg.Tensor.sigmoid,
            fg.Tensor.relu,
            fg.Tensor.exp,
            fg.Tensor.log,
            F.gelu,
            lambda t: F.gelu(t, approximate="tanh"),
            F.silu,
            F.mish,
            F.softplus,
            F.elu,
            F.hardswish,
            lambda t: F.leaky_relu(t, 0.1),
            F.logsigmoid,
            lambda t: c * t,  # the gradient of t, computed last, may take g's buffer
        ]
        y = x
        for _ in range(2):
            for f in steps:
                y = f(y)
                if hold:
                    # The gradient as the hook saw it: a rule writing over it later would
                    # change the held tensor.
                    y.register_hook(lambda g: keep.append((g, npv(g).copy())))
        y.sum().backward()
        for g, seen in keep:
            assert npv(g).tobytes() == seen.tobytes()
        return npv(x.grad).tobytes() + npv(c.grad).tobytes()

    assert grad(False) == grad(True)


CG_X = np.array([0.3, -0.8, 1.1])
CG_TANH = np.tanh(CG_X)


@pytest.mark.parametrize(
    "f, second, through_first_graph",
    [
        (lambda x: x.sin(), -np.sin(CG_X), False),  # saves the leaf: the new graph starts at x
        (lambda x: x * x, np.full(3, 2.0), False),
        (lambda x: x.tanh(), -2 * CG_TANH * (1 - CG_TANH**2), True),  # saves its output
    ],
)
@pytest.mark.parametrize("retain", [None, True, False])
def test_create_graph_without_retain_graph_matches_torch(f, second, through_first_graph, retain):
    # retain_graph=False frees the first graph's saved tensors as each rule runs, while the
    # gradient's own graph is built: a saved output must come back with its grad_fn, so a
    # second backward through it raises torch's error (checked against torch 2.15) instead of
    # silently dropping that path; one that does not pass through it gives the derivative.
    x = fg.tensor(CG_X, dtype=fg.float64, requires_grad=True)
    (g,) = fg.autograd.grad(f(x).sum(), x, create_graph=True, retain_graph=retain)
    assert g.requires_grad
    if retain is False and through_first_graph:
        with pytest.raises(RuntimeError, match=re.escape(ERR_TWICE[:60])):
            g.sum().backward()
        return
    g.sum().backward()
    npt.assert_allclose(npv(x.grad), second, rtol=1e-12)
