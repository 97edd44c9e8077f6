"""Side-by-side benchmarks: ferrograd vs torch (CPU) vs a NumPy-only baseline.

Every library sees the same float32 inputs (NumPy, fixed seed). Libraries alternate within each
repetition so machine noise hits them alike, and each timed step follows 20 ms of untimed steps
of the same library; the table shows medians and the ratio ferrograd / torch. With wide_graph
selected, ferrograd's step on 1 and on BENCH_THREADS threads is also timed, alternating the
thread count, for the parallel speedup.

    python benches/compare.py                # the engine and model workloads
    python benches/compare.py --ops          # ... and every nn.functional op alone
    python benches/compare.py --quick        # fewer repetitions
    python benches/compare.py tiny_chain hvp # some workloads
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

# NumPy's OpenBLAS workers busy-wait for 2^28 cycles (~0.1 s) after each call, on a core the
# next library's run needs: with libraries alternating, the NumPy baseline would slow whichever
# runs after it. 2^4 cycles lets them sleep at once (set the variable to override).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import ferrograd as fg  # noqa: E402
import numpy as np  # noqa: E402

try:
    import torch
except ImportError:  # the table then shows ferrograd and NumPy only
    torch = None

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
fg.set_num_threads(THREADS)
if torch is not None:
    torch.set_num_threads(THREADS)

RNG = np.random.default_rng(0)


def _rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _leaf(lib: Any, arr: np.ndarray) -> Any:
    return lib.tensor(arr).requires_grad_()


# ----- workloads: each returns {library: step function} and a figure formatter ----------------


def tiny_chain() -> Dict[str, Any]:
    n_ops = 5000
    x0 = _rand(16)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)

        def step() -> None:
            y = x
            for _ in range(n_ops // 4):
                y = ((y * 0.999) + 0.001).tanh().sin()
            y.sum().backward()
            x.grad = None

        return step

    def numpy_step() -> None:
        y, tape = x0.astype(np.float32), []
        for _ in range(n_ops // 4):
            a = y * np.float32(0.999) + np.float32(0.001)
            t = np.tanh(a)
            tape.append((t, np.cos(t)))
            y = np.sin(t)
        g = np.ones_like(y)
        for t, c in reversed(tape):
            g = g * c * (1 - t * t) * np.float32(0.999)

    return {"make": make, "numpy": numpy_step, "unit": "us/op", "scale": 1e6 / n_ops}


def scalar_mlp() -> Dict[str, Any]:
    w = [
        _rand(2, 16, scale=0.5),
        _rand(16),
        _rand(16, 16, scale=0.25),
        _rand(16),
        _rand(16, 1, scale=0.25),
        _rand(1),
    ]
    xs = _rand(64, 1, 2)

    def make(lib: Any) -> Callable[[], None]:
        ps = [_leaf(lib, a) for a in w]
        inputs = [lib.tensor(x) for x in xs]

        def step() -> None:
            total = None
            for x in inputs:
                h = (x @ ps[0] + ps[1]).tanh()
                h = (h @ ps[2] + ps[3]).tanh()
                out = (h @ ps[4] + ps[5]).sum()
                total = out if total is None else total + out
            total.backward()
            for p in ps:
                p.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def mlp_train() -> Dict[str, Any]:
    dims = [784, 512, 512, 10]
    ws = [_rand(a, b, scale=(2.0 / a) ** 0.5) for a, b in zip(dims, dims[1:])]
    bs = [np.zeros(b, np.float32) for b in dims[1:]]
    x0, y0 = _rand(128, 784), _rand(128, 10)
    flops = 3 * 2 * 128 * sum(a * b for a, b in zip(dims, dims[1:]))

    def make(lib: Any) -> Callable[[], None]:
        W = [_leaf(lib, w) for w in ws]
        B = [_leaf(lib, b) for b in bs]
        x, y = lib.tensor(x0), lib.tensor(y0)

        def step() -> None:
            h = x
            for i in range(3):
                h = h @ W[i] + B[i]
                if i < 2:
                    h = h.relu()
            loss = ((h - y) ** 2).mean()
            loss.backward()
            for p in W + B:
                p.grad = None

        return step

    def numpy_step() -> None:
        acts, h = [x0], x0
        for i in range(3):
            h = h @ ws[i] + bs[i]
            if i < 2:
                h = np.maximum(h, 0)
            acts.append(h)
        g = 2 * (h - y0) / h.size
        for i in reversed(range(3)):
            if i < 2:
                g = g * (acts[i + 1] > 0)
            _gw, _gb = acts[i].T @ g, g.sum(0)
            g = g @ ws[i].T

    return {"make": make, "numpy": numpy_step, "unit": "ms/step", "scale": 1e3, "flops": flops}


def wide_graph() -> Dict[str, Any]:
    x0 = _rand(192, 192)
    ws = [_rand(192, 192, scale=0.07) for _ in range(16)]

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)
        W = [lib.tensor(w) for w in ws]

        def step() -> None:
            total = None
            for w in W:
                h = x
                for _ in range(8):
                    h = (h @ w).tanh()
                s = h.sum()
                total = s if total is None else total + s
            total.backward()
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def matmul_big() -> Dict[str, Any]:
    a0, b0 = _rand(1024, 1024), _rand(1024, 1024)
    flops = 3 * 2 * 1024**3

    def make(lib: Any) -> Callable[[], None]:
        a, b = _leaf(lib, a0), _leaf(lib, b0)

        def step() -> None:
            (a @ b).sum().backward()
            a.grad = None
            b.grad = None

        return step

    def numpy_step() -> None:
        _c = a0 @ b0
        g = np.ones((1024, 1024), np.float32)
        _ga, _gb = g @ b0.T, a0.T @ g

    return {"make": make, "numpy": numpy_step, "unit": "GFLOP/s", "flops": flops, "rate": True}


def hvp() -> Dict[str, Any]:
    x0, w0, v0 = _rand(64, 256), _rand(256, 256, scale=0.06), _rand(256, 256)

    def make(lib: Any) -> Callable[[], None]:
        x, w, v = lib.tensor(x0), _leaf(lib, w0), lib.tensor(v0)

        def step() -> None:
            loss = ((x @ w).tanh() ** 2).sum()
            (g,) = lib.autograd.grad(loss, w, create_graph=True)
            (_h,) = lib.autograd.grad((g * v).sum(), w)

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def elementwise_big() -> Dict[str, Any]:
    x0 = _rand(4_000_000)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)

        def step() -> None:
            (x.sin() * x + x.exp() * 0.5).sum().backward()
            x.grad = None

        return step

    def numpy_step() -> None:
        _y = (np.sin(x0) * x0 + np.exp(x0) * np.float32(0.5)).sum()
        _g = np.cos(x0) * x0 + np.sin(x0) + np.exp(x0) * np.float32(0.5)

    return {"make": make, "numpy": numpy_step, "unit": "ms/step", "scale": 1e3}


def adam_step_10m() -> Dict[str, Any]:
    ps0 = [_rand(1_000_000, scale=0.1) for _ in range(10)]
    gs0 = [_rand(1_000_000, scale=0.01) for _ in range(10)]

    def make(lib: Any) -> Callable[[], None]:
        ps = [_leaf(lib, p) for p in ps0]
        for p, g in zip(ps, gs0):
            p.grad = lib.tensor(g)
        # torch's multi-tensor path; ferrograd always updates a group in one call.
        kw = {"foreach": True} if lib is torch else {}
        opt = lib.optim.Adam(ps, lr=1e-3, **kw)

        def step() -> None:
            opt.step()

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def train_loop() -> Dict[str, Any]:
    """A training step as scripts write it: an nn.Sequential MLP classifier, cross_entropy,
    zero_grad, backward, AdamW step."""
    x0 = _rand(128, 784)
    y0 = RNG.integers(0, 10, 128)

    def make(lib: Any) -> Callable[[], None]:
        lib.manual_seed(0)
        nn = lib.nn
        model = nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )
        opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = lib.tensor(x0), lib.tensor(y0)

        def step() -> None:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def lstm_train() -> Dict[str, Any]:
    """A two-layer LSTM over 50 steps (batch 32, 64 in, 128 hidden), forward and backward."""
    x0 = _rand(50, 32, 64)

    def make(lib: Any) -> Callable[[], None]:
        lib.manual_seed(0)
        model = lib.nn.LSTM(64, 128, num_layers=2)
        x = lib.tensor(x0)

        def step() -> None:
            model.zero_grad()
            out, _ = model(x)
            out.sum().backward()

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def layer_norm() -> Dict[str, Any]:
    x0, w0, b0, g0 = _rand(64, 128, 512), _rand(512), _rand(512), _rand(64, 128, 512)

    def make(lib: Any) -> Callable[[], None]:
        x, w, b, g = _leaf(lib, x0), _leaf(lib, w0), _leaf(lib, b0), lib.tensor(g0)
        F = lib.nn.functional

        def step() -> None:
            F.layer_norm(x, (512,), w, b).backward(g)
            x.grad = w.grad = b.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def batch_norm2d() -> Dict[str, Any]:
    x0, w0, b0, g0 = _rand(16, 64, 32, 32), _rand(64), _rand(64), _rand(16, 64, 32, 32)

    def make(lib: Any) -> Callable[[], None]:
        x, w, b, g = _leaf(lib, x0), _leaf(lib, w0), _leaf(lib, b0), lib.tensor(g0)
        rm, rv = lib.zeros(64), lib.ones(64)
        F = lib.nn.functional

        def step() -> None:
            F.batch_norm(x, rm, rv, w, b, training=True).backward(g)
            x.grad = w.grad = b.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def attention_1024() -> Dict[str, Any]:
    # batch 1, 8 heads, sequence 1024, width 512 (head dim 64): forward + backward
    q0, k0, v0, g0 = (_rand(1, 8, 1024, 64) for _ in range(4))

    def make(lib: Any) -> Callable[[], None]:
        q, k, v = _leaf(lib, q0), _leaf(lib, k0), _leaf(lib, v0)
        g = lib.tensor(g0)

        def step() -> None:
            lib.nn.functional.scaled_dot_product_attention(q, k, v).backward(g)
            q.grad = k.grad = v.grad = None

        return step

    # peak resident memory of a child running the same steps (inputs included)
    peak = (
        "import numpy as np, {m} as L\nimport {m}.nn.functional\n"
        "r = np.random.default_rng(0)\n"
        "q, k, v = (L.tensor(r.standard_normal((1, 8, 1024, 64)).astype('f')).requires_grad_()"
        " for _ in range(3))\n"
        "g = L.tensor(r.standard_normal((1, 8, 1024, 64)).astype('f'))\n"
        "base = int(next(l.split()[1] for l in open('/proc/self/status')"
        " if l.startswith('VmRSS')))\n"
        "for _ in range(3):\n"
        "    L.nn.functional.scaled_dot_product_attention(q, k, v).backward(g)\n"
        "print('growth', base)\n"
    )
    return {"make": make, "unit": "ms/step", "scale": 1e3, "peak": peak}


def transformer_block() -> Dict[str, Any]:
    # pre-norm block: layer_norm, qkv linear, 4-head attention, gelu MLP; batch 8, seq 64,
    # width 128; forward + backward + SGD step
    n, t, d, h = 8, 64, 128, 4
    x0 = _rand(n, t, d)
    shapes = {
        "ln1_w": (d,), "ln1_b": (d,), "qkv_w": (3 * d, d), "qkv_b": (3 * d,),
        "out_w": (d, d), "out_b": (d,), "ln2_w": (d,), "ln2_b": (d,),
        "fc1_w": (4 * d, d), "fc1_b": (4 * d,), "fc2_w": (d, 4 * d), "fc2_b": (d,),
    }  # fmt: skip
    init = {k: _rand(*s, scale=0.05) + (1.0 if k.startswith("ln") and k.endswith("w") else 0.0)
            for k, s in shapes.items()}  # fmt: skip

    def make(lib: Any) -> Callable[[], None]:
        F = lib.nn.functional
        p = {k: _leaf(lib, v.astype(np.float32)) for k, v in init.items()}
        x = lib.tensor(x0)
        opt = lib.optim.SGD(list(p.values()), lr=1e-3)

        def step() -> None:
            y = F.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])
            qkv = F.linear(y, p["qkv_w"], p["qkv_b"]).reshape(n, t, 3, h, d // h)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, t, d)
            x1 = x + F.linear(a, p["out_w"], p["out_b"])
            y = F.layer_norm(x1, (d,), p["ln2_w"], p["ln2_b"])
            y = F.linear(F.gelu(F.linear(y, p["fc1_w"], p["fc1_b"])), p["fc2_w"], p["fc2_b"])
            loss = (x1 + y).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def mlp_infer() -> Dict[str, Any]:
    """Serving-style inference: two transformer MLP blocks (nn.Linear 1024 -> 4096, GELU,
    4096 -> 1024) on 8 tokens in eval mode under no_grad, where every product is `x @ W.T`
    with few rows."""
    x0 = _rand(8, 1024)

    def make(lib: Any) -> Callable[[], None]:
        lib.manual_seed(0)
        nn = lib.nn
        layers = [nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)]
        layers += [nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)]
        model = nn.Sequential(*layers).eval()
        x = lib.tensor(x0)

        def step() -> None:
            with lib.no_grad():
                model(x)

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def dataloader_epoch() -> Dict[str, Any]:
    """One shuffled pass of a DataLoader over a 20,000-sample TensorDataset (784 features and a
    label), batches of 64, as training scripts feed MNIST-sized data: per-sample indexing and
    default_collate."""
    x0, y0 = _rand(20000, 784), RNG.integers(0, 10, 20000)

    def make(lib: Any) -> Callable[[], None]:
        data = lib.utils.data
        loader = data.DataLoader(
            data.TensorDataset(lib.tensor(x0), lib.tensor(y0)), batch_size=64, shuffle=True
        )

        def step() -> None:
            for _xb, _yb in loader:
                pass

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def _deep_mlp(checkpointed: bool) -> Dict[str, Any]:
    # 16 tanh layers of width 256 on a batch of 4096 (activations dominate memory), forward +
    # backward; with checkpointed, in 4 non-reentrant checkpoint segments (activations
    # recomputed in backward)
    depth, width, batch = 16, 256, 4096
    ws = [_rand(width, width, scale=1.0 / width**0.5) for _ in range(depth)]
    x0 = _rand(batch, width)
    body = (
        "def run(x):\n"
        "    for w in ws:\n"
        "        x = (x @ w).tanh()\n"
        "    return x\n"
        "def segment(a, b):\n"
        "    def f(x):\n"
        "        for w in ws[a:b]:\n"
        "            x = (x @ w).tanh()\n"
        "        return x\n"
        "    return f\n"
        "def run_ckpt(x):\n"
        "    for a in range(0, len(ws) - 4, 4):\n"
        "        x = L.utils.checkpoint.checkpoint(segment(a, a + 4), x, use_reentrant=False)\n"
        "    return segment(len(ws) - 4, len(ws))(x)\n"
    )
    fn = "run_ckpt" if checkpointed else "run"

    def make(lib: Any) -> Callable[[], None]:
        scope: Dict[str, Any] = {"L": lib, "ws": [_leaf(lib, w) for w in ws]}
        if lib.__name__ == "torch":
            import torch.utils.checkpoint  # noqa: F401
        exec(body, scope)
        x = lib.tensor(x0)
        run = scope[fn]

        def step() -> None:
            run(x).sum().backward()
            for w in scope["ws"]:
                w.grad = None

        return step

    peak = (
        "import numpy as np, {m} as L\nimport {m}.utils.checkpoint\n"
        f"r = np.random.default_rng(0)\n"
        f"ws = [L.tensor((r.standard_normal(({width}, {width})) / {width**0.5}).astype('f'))"
        f".requires_grad_() for _ in range({depth})]\n"
        f"x = L.tensor(r.standard_normal(({batch}, {width})).astype('f'))\n"
        + body
        + "base = int(next(l.split()[1] for l in open('/proc/self/status')"
        " if l.startswith('VmRSS')))\n"
        f"for _ in range(3):\n    {fn}(x).sum().backward()\n"
        "print('growth', base)\n"
    )
    return {"make": make, "unit": "ms/step", "scale": 1e3, "peak": peak}


def deep_mlp() -> Dict[str, Any]:
    return _deep_mlp(False)


def deep_mlp_checkpoint() -> Dict[str, Any]:
    return _deep_mlp(True)


def _func(lib: Any) -> Any:
    """``torch.func`` / ``ferrograd.func``."""
    if lib.__name__ == "torch":
        import torch.func

        return torch.func
    return lib.func


def _mlp_jacobian(transform: str) -> Dict[str, Any]:
    # the Jacobian of a 64 -> 64 two-layer tanh MLP by func.<transform>
    w1, w2, x0 = _rand(64, 64, scale=0.125), _rand(64, 64, scale=0.125), _rand(64)

    def make(lib: Any) -> Callable[[], None]:
        a, b, x = lib.tensor(w1), lib.tensor(w2), lib.tensor(x0)
        jac = getattr(_func(lib), transform)(lambda v: lib.tanh(lib.tanh(v @ a) @ b))

        def step() -> None:
            jac(x)

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def jacfwd_mlp() -> Dict[str, Any]:
    # issue 14's goal: <= 0.8 of torch.func
    return _mlp_jacobian("jacfwd")


def jacrev_mlp() -> Dict[str, Any]:
    return _mlp_jacobian("jacrev")


def hessian_256() -> Dict[str, Any]:
    # Hessian of tanh(A x).sum() + sum(x^3) for 256 inputs
    a0, x0 = _rand(256, 256, scale=1 / 16), _rand(256, scale=0.1)

    def make(lib: Any) -> Callable[[], None]:
        a, x = lib.tensor(a0), lib.tensor(x0)
        hess = _func(lib).hessian(lambda v: lib.tanh(a @ v).sum() + (v**3).sum())

        def step() -> None:
            hess(x)

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def per_sample_grads() -> Dict[str, Any]:
    # per-sample gradients of a 784-128-10 MLP over a batch of 64 with vmap(grad(loss)), as
    # the torch.func tutorial writes it (issue 14's goal: <= 0.8 of torch.func)
    p0 = {
        "w1": _rand(128, 784, scale=0.03), "b1": _rand(128, scale=0.03),
        "w2": _rand(10, 128, scale=0.1), "b2": _rand(10, scale=0.1),
    }  # fmt: skip
    x0, y0 = _rand(64, 784), RNG.integers(0, 10, size=64)

    def make(lib: Any) -> Callable[[], None]:
        F = lib.nn.functional
        p = {k: lib.tensor(v) for k, v in p0.items()}
        x, y = lib.tensor(x0), lib.tensor(y0)

        def loss(params: Dict[str, Any], xi: Any, yi: Any) -> Any:
            h = F.relu(F.linear(xi, params["w1"], params["b1"]))
            return F.cross_entropy(F.linear(h, params["w2"], params["b2"]), yi)

        batched = _func(lib).vmap(_func(lib).grad(loss), in_dims=(None, 0, 0))

        def step() -> None:
            batched(p, x, y)

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def _peak_cells(code: str) -> str:
    """Peak RSS of each library running ``code`` in a child, and the growth over its RSS once the
    inputs exist (the code prints that baseline in kB), with the ratio ferrograd / torch."""
    libs = ["ferrograd"] + (["torch"] if torch is not None else [])
    report = (
        "\nprint(next(int(l.split()[1]) for l in open('/proc/self/status')"
        " if l.startswith('VmHWM')))\n"
    )
    figures = {}
    for m in libs:
        out = subprocess.run(
            [sys.executable, "-c", code.format(m=m) + report],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        base = int(out[out.index("growth") + 1])
        figures[m] = (int(out[-1]) / 1024.0, (int(out[-1]) - base) / 1024.0)
    cells = "  ".join(f"{m} {p:.0f} MB (+{g:.0f} MB)" for m, (p, g) in figures.items())
    if "torch" in figures:
        cells += f"  growth ratio {figures['ferrograd'][1] / figures['torch'][1]:.2f}"
    return cells


def gelu() -> Dict[str, Any]:
    x0 = _rand(512, 512)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)

        def step() -> None:
            lib.nn.functional.gelu(x).sum().backward()
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def silu() -> Dict[str, Any]:
    x0 = _rand(512, 512)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)

        def step() -> None:
            lib.nn.functional.silu(x).sum().backward()
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def log_softmax() -> Dict[str, Any]:
    x0 = _rand(256, 1024, scale=3.0)
    w0 = _rand(256, 1024)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)
        w = lib.tensor(w0)

        def step() -> None:
            (lib.nn.functional.log_softmax(x, dim=-1) * w).sum().backward()
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def softplus() -> Dict[str, Any]:
    x0 = _rand(512, 512)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)

        def step() -> None:
            lib.nn.functional.softplus(x).sum().backward()
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def softmax() -> Dict[str, Any]:
    x0 = _rand(256, 1024, scale=3.0)
    w0 = _rand(256, 1024)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)
        w = lib.tensor(w0)

        def step() -> None:
            (lib.nn.functional.softmax(x, dim=-1) * w).sum().backward()
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def cross_entropy() -> Dict[str, Any]:
    x0 = _rand(512, 1000, scale=3.0)
    t0 = np.random.default_rng(7).integers(0, 1000, size=512)

    def make(lib: Any) -> Callable[[], None]:
        x = _leaf(lib, x0)
        t = lib.tensor(t0)

        def step() -> None:
            lib.nn.functional.cross_entropy(x, t, label_smoothing=0.1).backward()
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def conv2d() -> Dict[str, Any]:
    x0, w0, b0 = _rand(32, 16, 28, 28), _rand(32, 16, 3, 3, scale=0.1), _rand(32)
    g0 = _rand(32, 32, 28, 28)

    def make(lib: Any) -> Callable[[], None]:
        x, w, b = _leaf(lib, x0), _leaf(lib, w0), _leaf(lib, b0)
        g = lib.tensor(g0)

        def step() -> None:
            lib.nn.functional.conv2d(x, w, b, padding=1).backward(g)
            x.grad = w.grad = b.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def max_pool2d() -> Dict[str, Any]:
    x0, g0 = _rand(32, 16, 28, 28), _rand(32, 16, 14, 14)

    def make(lib: Any) -> Callable[[], None]:
        x, g = _leaf(lib, x0), lib.tensor(g0)

        def step() -> None:
            lib.nn.functional.max_pool2d(x, 2).backward(g)
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def interpolate_bilinear() -> Dict[str, Any]:
    x0, g0 = _rand(16, 32, 64, 64), _rand(16, 32, 128, 128)

    def make(lib: Any) -> Callable[[], None]:
        x, g = _leaf(lib, x0), lib.tensor(g0)

        def step() -> None:
            lib.nn.functional.interpolate(
                x, size=(128, 128), mode="bilinear", align_corners=False
            ).backward(g)
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def pixel_shuffle() -> Dict[str, Any]:
    x0, g0 = _rand(16, 256, 32, 32), _rand(16, 64, 64, 64)

    def make(lib: Any) -> Callable[[], None]:
        x, g = _leaf(lib, x0), lib.tensor(g0)

        def step() -> None:
            lib.nn.functional.pixel_shuffle(x, 2).backward(g)
            x.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def transpose_copy() -> Dict[str, Any]:
    """w.t().contiguous() of a 512 x 784 leaf and its backward: a transposed copy each way, the
    second being the one a linear layer's weight gradient needs to land in .grad."""
    w0, g0 = _rand(512, 784), _rand(784, 512)

    def make(lib: Any) -> Callable[[], None]:
        w, g = _leaf(lib, w0), lib.tensor(g0)

        def step() -> None:
            w.t().contiguous().backward(g)
            w.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def cnn_train() -> Dict[str, Any]:
    """LeNet-style step: two conv2d 5x5 + relu + max_pool2d 2x2, linear, cross_entropy, SGD."""
    x0 = _rand(32, 1, 28, 28)
    y0 = RNG.integers(0, 10, 32)
    ws = [
        _rand(6, 1, 5, 5, scale=0.2),
        _rand(6, scale=0.1),
        _rand(16, 6, 5, 5, scale=0.08),
        _rand(16, scale=0.1),
        _rand(10, 256, scale=0.06),
        _rand(10, scale=0.1),
    ]

    def make(lib: Any) -> Callable[[], None]:
        F = lib.nn.functional
        ps = [_leaf(lib, w) for w in ws]
        x, y = lib.tensor(x0), lib.tensor(y0)
        opt = lib.optim.SGD(ps, lr=0.01)

        def step() -> None:
            h = F.max_pool2d(F.relu(F.conv2d(x, ps[0], ps[1])), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, ps[2], ps[3])), 2)
            loss = F.cross_entropy(F.linear(h.reshape(32, 256), ps[4], ps[5]), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def _basic_block(lib: Any, channels: int, weights: List[np.ndarray]) -> Any:
    """torchvision's BasicBlock as written there (conv3x3 + BatchNorm2d + ReLU(inplace=True)
    twice, ``out += identity``), its two convolutions' weights set to ``weights``."""
    nn = lib.nn

    class BasicBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x: Any) -> Any:
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    block = BasicBlock()
    with lib.no_grad():
        block.conv1.weight.copy_(lib.tensor(weights[0]))
        block.conv2.weight.copy_(lib.tensor(weights[1]))
    return block


def resnet_block() -> Dict[str, Any]:
    """torchvision's BasicBlock as written there (conv3x3 + BatchNorm2d + ReLU(inplace=True)
    twice, ``out += identity``), batch 16, 64 channels, 32x32, in training mode: forward,
    backward and an SGD step with momentum."""
    x0 = _rand(16, 64, 32, 32)
    w0 = [_rand(64, 64, 3, 3, scale=0.04), _rand(64, 64, 3, 3, scale=0.04)]

    def make(lib: Any) -> Callable[[], None]:
        block = _basic_block(lib, 64, w0)
        x = lib.tensor(x0)
        opt = lib.optim.SGD(block.parameters(), lr=0.01, momentum=0.9)

        def step() -> None:
            loss = block(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def resnet_infer_7x7() -> Dict[str, Any]:
    """The last stage of a ResNet-18 at inference: torchvision's BasicBlock with 512 channels
    on one 7x7 image, eval mode under ``no_grad`` (two 3x3 convolutions of 2.4M weights each
    on 49 positions: few positions, many channels)."""
    x0 = _rand(1, 512, 7, 7)
    w0 = [_rand(512, 512, 3, 3, scale=0.015), _rand(512, 512, 3, 3, scale=0.015)]

    def make(lib: Any) -> Callable[[], None]:
        block = _basic_block(lib, 512, w0).eval()
        x = lib.tensor(x0)

        def step() -> None:
            with lib.no_grad():
                block(x)

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def cosine_similarity() -> Dict[str, Any]:
    """4096 pairs of 256-vectors, forward and backward to both sides."""
    a0, b0, g0 = _rand(4096, 256), _rand(4096, 256), _rand(4096)

    def make(lib: Any) -> Callable[[], None]:
        a, b, g = _leaf(lib, a0), _leaf(lib, b0), lib.tensor(g0)

        def step() -> None:
            lib.nn.functional.cosine_similarity(a, b).backward(g)
            a.grad = b.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


def embedding_bag() -> Dict[str, Any]:
    """Mean of 4096 bags of 20 rows of a 10k x 128 table, forward and weight gradient."""
    w0, g0 = _rand(10_000, 128), _rand(4096, 128)
    i0 = np.random.default_rng(11).integers(0, 10_000, size=4096 * 20)
    o0 = np.arange(0, 4096 * 20, 20)

    def make(lib: Any) -> Callable[[], None]:
        w, g = _leaf(lib, w0), lib.tensor(g0)
        i, o = lib.tensor(i0), lib.tensor(o0)

        def step() -> None:
            lib.nn.functional.embedding_bag(i, w, o, mode="mean").backward(g)
            w.grad = None

        return step

    return {"make": make, "unit": "ms/step", "scale": 1e3}


# ----- linalg: 256x256 float64 factorisations (faer in ferrograd, LAPACK in torch/numpy) --------


def _linalg(kind: str) -> Callable[[], Dict[str, Any]]:
    """A forward factorisation of one well-conditioned 256x256 float64 matrix (symmetric
    positive-definite for eigh/cholesky), or svd's forward+backward with ``_bwd``."""

    def workload() -> Dict[str, Any]:
        r = RNG.standard_normal((256, 256))
        a0 = r + 16.0 * np.eye(256)
        s0 = a0 @ a0.T
        b0 = RNG.standard_normal((256, 256))
        src = s0 if kind in ("eigh", "cholesky") else a0
        if kind == "det":
            src = a0 / 16.0  # |det| of a0 itself overflows float64

        def make(lib: Any) -> Callable[[], None]:
            a, b = lib.tensor(src), lib.tensor(b0)
            L = lib.linalg
            if kind == "svd_bwd":
                x = lib.tensor(src).requires_grad_()

                def step_bwd() -> None:
                    U, S, Vh = L.svd(x, full_matrices=False)
                    (U.sum() + S.sum() + Vh.sum()).backward()
                    x.grad = None

                return step_bwd
            fns = {
                "svd": lambda: L.svd(a, full_matrices=False),
                "eigh": lambda: L.eigh(a),
                "solve": lambda: L.solve(a, b),
                "inv": lambda: L.inv(a),
                "qr": lambda: L.qr(a),
                "cholesky": lambda: L.cholesky(a),
                "det": lambda: L.det(a),
            }
            f = fns[kind]

            def step() -> None:
                f()

            return step

        npf: Dict[str, Callable[[], Any]] = {
            "svd": lambda: np.linalg.svd(src, full_matrices=False),
            "eigh": lambda: np.linalg.eigh(src),
            "solve": lambda: np.linalg.solve(src, b0),
            "inv": lambda: np.linalg.inv(src),
            "qr": lambda: np.linalg.qr(src),
            "cholesky": lambda: np.linalg.cholesky(src),
            "det": lambda: np.linalg.det(src),
        }
        spec: Dict[str, Any] = {"make": make, "unit": "ms/call", "scale": 1e3}
        if kind in npf:  # NumPy has no backward: no column for svd_bwd
            spec["numpy"] = npf[kind]
        return spec

    return workload


def _nn_op(
    inputs: List[Tuple[np.ndarray, bool]],
    call: Callable[..., Any],
    backward: bool = True,
) -> Callable[[], Dict[str, Any]]:
    """One ``nn.functional`` op alone: ``call(lib, *tensors)`` forward, then backward from a
    fixed random output gradient into every input marked ``True`` (float, requiring grad)."""

    def spec() -> Dict[str, Any]:
        def make(lib: Any) -> Callable[[], None]:
            ts = [
                _leaf(lib, a) if g else lib.tensor(a)
                for a, g in inputs  # integer inputs (indices, targets) never require grad
            ]
            leaves = [t for t, (_, g) in zip(ts, inputs) if g]
            if not backward:

                def forward() -> None:
                    call(lib, *ts)

                return forward
            out = call(lib, *ts)
            gout = lib.tensor(_rand(*out.shape)) if out.dim() else None

            def step() -> None:
                call(lib, *ts).backward(gout)
                for t in leaves:
                    t.grad = None

            return step

        return {"make": make, "unit": "ms/step", "scale": 1e3}

    return spec


def _idx(high: int, *shape: int) -> np.ndarray:
    return RNG.integers(0, high, shape).astype(np.int64)


def _prob(*shape: int) -> np.ndarray:
    return RNG.uniform(0.05, 0.95, shape).astype(np.float32)


def _logp(rows: int, classes: int) -> np.ndarray:
    x = _rand(rows, classes)
    return (x - np.log(np.exp(x).sum(1, keepdims=True))).astype(np.float32)


# Every nn.functional op of issue 12 not already timed above, alone, at a mid-size shape
# (forward and backward, float32). `python benches/compare.py --ops` runs them all.
_F = lambda lib: lib.nn.functional  # noqa: E731
_ACT = [(_rand(512, 512), True)]
_REGRESSION = [(_rand(512, 1000), True), (_rand(512, 1000), False)]
NN_OPS: Dict[str, Callable[[], Dict[str, Any]]] = {
    "conv1d": _nn_op(
        [(_rand(32, 32, 256), True), (_rand(64, 32, 5, scale=0.1), True)],
        lambda L, x, w: _F(L).conv1d(x, w, padding=2),
    ),
    "conv3d": _nn_op(
        [(_rand(8, 8, 16, 16, 16), True), (_rand(16, 8, 3, 3, 3, scale=0.1), True)],
        lambda L, x, w: _F(L).conv3d(x, w, padding=1),
    ),
    "conv_transpose1d": _nn_op(
        [(_rand(32, 32, 128), True), (_rand(32, 16, 4, scale=0.1), True)],
        lambda L, x, w: _F(L).conv_transpose1d(x, w, stride=2, padding=1),
    ),
    "conv_transpose2d": _nn_op(
        [(_rand(16, 32, 16, 16), True), (_rand(32, 16, 4, 4, scale=0.1), True)],
        lambda L, x, w: _F(L).conv_transpose2d(x, w, stride=2, padding=1),
    ),
    "depthwise_conv2d": _nn_op(
        [(_rand(16, 64, 32, 32), True), (_rand(64, 1, 3, 3, scale=0.1), True)],
        lambda L, x, w: _F(L).conv2d(x, w, padding=1, groups=64),
    ),
    "max_pool1d": _nn_op(
        [(_rand(32, 64, 512), True)], lambda L, x: _F(L).max_pool1d(x, 2)
    ),
    "max_pool3d": _nn_op(
        [(_rand(8, 16, 16, 16, 16), True)], lambda L, x: _F(L).max_pool3d(x, 2)
    ),
    "avg_pool1d": _nn_op(
        [(_rand(32, 64, 512), True)], lambda L, x: _F(L).avg_pool1d(x, 2)
    ),
    "avg_pool2d": _nn_op(
        [(_rand(32, 16, 28, 28), True)], lambda L, x: _F(L).avg_pool2d(x, 2)
    ),
    "avg_pool3d": _nn_op(
        [(_rand(8, 16, 16, 16, 16), True)], lambda L, x: _F(L).avg_pool3d(x, 2)
    ),
    "adaptive_avg_pool1d": _nn_op(
        [(_rand(32, 64, 500), True)], lambda L, x: _F(L).adaptive_avg_pool1d(x, 50)
    ),
    "adaptive_avg_pool2d": _nn_op(
        [(_rand(32, 64, 28, 28), True)], lambda L, x: _F(L).adaptive_avg_pool2d(x, 7)
    ),
    "adaptive_max_pool2d": _nn_op(
        [(_rand(32, 64, 28, 28), True)], lambda L, x: _F(L).adaptive_max_pool2d(x, 7)
    ),
    "group_norm": _nn_op(
        [(_rand(16, 64, 32, 32), True), (_rand(64), True), (_rand(64), True)],
        lambda L, x, w, b: _F(L).group_norm(x, 8, w, b),
    ),
    "instance_norm": _nn_op(
        [(_rand(16, 64, 32, 32), True)], lambda L, x: _F(L).instance_norm(x)
    ),
    "rms_norm": _nn_op(
        [(_rand(64, 128, 512), True), (_rand(512), True)],
        lambda L, x, w: _F(L).rms_norm(x, (512,), w),
    ),
    "nll_loss": _nn_op(
        [(_logp(512, 1000), True), (_idx(1000, 512), False)],
        lambda L, x, t: _F(L).nll_loss(x, t),
    ),
    "binary_cross_entropy": _nn_op(
        [(_prob(512, 1000), True), (_prob(512, 1000), False)],
        lambda L, x, t: _F(L).binary_cross_entropy(x, t),
    ),
    "bce_with_logits": _nn_op(
        [(_rand(512, 1000), True), (_prob(512, 1000), False)],
        lambda L, x, t: _F(L).binary_cross_entropy_with_logits(x, t),
    ),
    "mse_loss": _nn_op(_REGRESSION, lambda L, x, t: _F(L).mse_loss(x, t)),
    "l1_loss": _nn_op(_REGRESSION, lambda L, x, t: _F(L).l1_loss(x, t)),
    "smooth_l1_loss": _nn_op(_REGRESSION, lambda L, x, t: _F(L).smooth_l1_loss(x, t)),
    "huber_loss": _nn_op(_REGRESSION, lambda L, x, t: _F(L).huber_loss(x, t)),
    "kl_div": _nn_op(
        [(_logp(512, 1000), True), (_logp(512, 1000), False)],
        lambda L, x, t: _F(L).kl_div(x, t, reduction="batchmean", log_target=True),
    ),
    "mish": _nn_op(_ACT, lambda L, x: _F(L).mish(x)),
    "elu": _nn_op(_ACT, lambda L, x: _F(L).elu(x)),
    "selu": _nn_op(_ACT, lambda L, x: _F(L).selu(x)),
    "celu": _nn_op(_ACT, lambda L, x: _F(L).celu(x)),
    "gelu_tanh": _nn_op(_ACT, lambda L, x: _F(L).gelu(x, approximate="tanh")),
    "hardswish": _nn_op(_ACT, lambda L, x: _F(L).hardswish(x)),
    "hardsigmoid": _nn_op(_ACT, lambda L, x: _F(L).hardsigmoid(x)),
    "relu6": _nn_op(_ACT, lambda L, x: _F(L).relu6(x)),
    "leaky_relu": _nn_op(_ACT, lambda L, x: _F(L).leaky_relu(x, 0.1)),
    "logsigmoid": _nn_op(_ACT, lambda L, x: _F(L).logsigmoid(x)),
    "glu": _nn_op([(_rand(512, 1024), True)], lambda L, x: _F(L).glu(x)),
    "embedding": _nn_op(
        [(_idx(10000, 4096, 20), False), (_rand(10000, 128), True)],
        lambda L, i, w: _F(L).embedding(i, w),
    ),
    "one_hot": _nn_op(
        [(_idx(1000, 4096, 20), False)],
        lambda L, i: _F(L).one_hot(i, 1000),
        backward=False,
    ),
    "pad_reflect": _nn_op(
        [(_rand(16, 32, 64, 64), True)], lambda L, x: _F(L).pad(x, (2, 2, 2, 2), mode="reflect")
    ),
    "pad_constant": _nn_op(
        [(_rand(16, 32, 64, 64), True)], lambda L, x: _F(L).pad(x, (2, 2, 2, 2))
    ),
    "unfold": _nn_op(
        [(_rand(16, 16, 32, 32), True)], lambda L, x: _F(L).unfold(x, 3, padding=1)
    ),
    "fold": _nn_op(
        [(_rand(16, 144, 1024), True)],
        lambda L, x: _F(L).fold(x, (32, 32), 3, padding=1),
    ),
    "pairwise_distance": _nn_op(
        [(_rand(4096, 256), True), (_rand(4096, 256), True)],
        lambda L, a, b: _F(L).pairwise_distance(a, b),
    ),
}


WORKLOADS = {
    "tiny_chain": (tiny_chain, 0.07),
    "scalar_mlp": (scalar_mlp, 0.30),
    "mlp_train": (mlp_train, 1.00),
    "wide_graph": (wide_graph, 0.70),
    "matmul_big": (matmul_big, 1.05),
    "hvp": (hvp, 1.00),
    "elementwise_big": (elementwise_big, 0.70),
    "adam_step_10M": (adam_step_10m, 1.00),
    "train_loop": (train_loop, 1.00),
    "lstm_train": (lstm_train, 1.00),
    "layer_norm": (layer_norm, 1.00),
    "batch_norm2d": (batch_norm2d, 1.00),
    "attention_1024": (attention_1024, 1.00),
    "transformer_block": (transformer_block, 0.90),
    "mlp_infer": (mlp_infer, 1.00),
    "dataloader_epoch": (dataloader_epoch, 1.00),
    "gelu": (gelu, 1.00),
    "silu": (silu, 1.00),
    "softmax": (softmax, 1.00),
    "log_softmax": (log_softmax, 1.00),
    "softplus": (softplus, 1.00),
    "cross_entropy": (cross_entropy, 1.00),
    "conv2d": (conv2d, 1.00),
    "max_pool2d": (max_pool2d, 1.00),
    "cnn_train": (cnn_train, 0.90),
    "resnet_block": (resnet_block, 0.90),
    "resnet_infer_7x7": (resnet_infer_7x7, 1.00),
    "interpolate_bilinear": (interpolate_bilinear, 1.00),
    "pixel_shuffle": (pixel_shuffle, 1.00),
    "transpose_copy": (transpose_copy, 1.00),
    "cosine_similarity": (cosine_similarity, 1.00),
    "embedding_bag": (embedding_bag, 1.00),
    "deep_mlp": (deep_mlp, 1.00),
    "deep_mlp_checkpoint": (deep_mlp_checkpoint, 1.00),
    "jacfwd_mlp": (jacfwd_mlp, 0.80),
    "jacrev_mlp": (jacrev_mlp, 1.00),
    "hessian_256": (hessian_256, 1.00),
    "per_sample_grads": (per_sample_grads, 0.80),
    "linalg_svd_256": (_linalg("svd"), 1.50),
    "linalg_svd_bwd_256": (_linalg("svd_bwd"), 1.50),
    "linalg_eigh_256": (_linalg("eigh"), 1.50),
    "linalg_solve_256": (_linalg("solve"), 1.50),
    "linalg_inv_256": (_linalg("inv"), 1.50),
    "linalg_qr_256": (_linalg("qr"), 1.50),
    "linalg_cholesky_256": (_linalg("cholesky"), 1.50),
    "linalg_det_256": (_linalg("det"), 1.50),
}

WORKLOADS.update({name: (spec, 1.00) for name, spec in NN_OPS.items()})
# What runs without workload names: the model and engine rows; `--ops` adds the per-op rows.
DEFAULT_WORKLOADS = [w for w in WORKLOADS if w not in NN_OPS]


SETTLE_S = 0.02


def _time(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_workload(name: str, reps: int) -> Dict[str, Any]:
    spec = WORKLOADS[name][0]()
    steps: Dict[str, Callable[[], None]] = {"ferrograd": spec["make"](fg)}
    if torch is not None:
        steps["torch"] = spec["make"](torch)
    if "numpy" in spec:
        steps["numpy"] = spec["numpy"]
    for fn in steps.values():  # warm up
        fn()
    times: Dict[str, List[float]] = {k: [] for k in steps}
    for _ in range(reps):
        for lib, fn in steps.items():  # alternate libraries within each repetition
            # Untimed steps first, for at least SETTLE_S: the previous library's idle workers
            # (libgomp spins for milliseconds after a parallel region, OpenBLAS too, ferrograd's
            # helpers for 0.5 ms) would otherwise take a core from the timed step, which no user
            # running one library sees; and this library's own workers are awake, as in a
            # training loop. One untimed step was not enough for sub-millisecond steps: hvp
            # read 0.55 ms after torch's step and 0.35 ms alone.
            settle = time.perf_counter() + SETTLE_S
            fn()
            while time.perf_counter() < settle:
                fn()
            times[lib].append(_time(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"spec": spec, "median": med}


def thread_scaling(name: str, reps: int) -> Dict[int, float]:
    """Median ferrograd step of workload `name` on 1 and on THREADS threads, alternating the
    thread count within each repetition (so drift on a shared machine hits both alike)."""
    step = WORKLOADS[name][0]()["make"](fg)
    counts = sorted({1, THREADS})
    times: Dict[int, List[float]] = {n: [] for n in counts}
    try:
        for _ in range(reps):
            for n in counts:
                fg.set_num_threads(n)
                settle = time.perf_counter() + SETTLE_S
                step()
                while time.perf_counter() < settle:
                    step()
                times[n].append(_time(step))
    finally:
        fg.set_num_threads(THREADS)
    return {n: statistics.median(v) for n, v in times.items()}


def fmt_figure(spec: Dict[str, Any], seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if spec.get("rate"):
        return f"{spec['flops'] / seconds / 1e9:.1f}"
    return f"{seconds * spec['scale']:.3g}"


def peak_rss_mb(code: str) -> float:
    """Peak resident memory of a fresh child Python running ``code``, in MB."""
    # VmHWM (kB) starts afresh at exec; ru_maxrss would carry this process's peak into the child.
    report = (
        "\nprint(next(int(l.split()[1]) for l in open('/proc/self/status')"
        " if l.startswith('VmHWM')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code + report], check=True, capture_output=True, text=True
    )
    return int(out.stdout.strip().splitlines()[-1]) / 1024.0


def bytes_per_recorded_op(module: str, n: int = 1_000_000) -> float:
    """Resident memory a graph keeps per recorded op: a chain of ``n`` multiplications of a
    one-element tensor by a number, measured in a fresh child."""
    code = (
        f"import {module} as L\n"
        "def rss():\n    return int(open('/proc/self/statm').read().split()[1]) * 4096\n"
        "x = L.ones(1, requires_grad=True)\ny = x * 1.0\nbase = rss()\n"
        f"for _ in range({n}):\n    y = y * 1.0000001\n"
        f"print((rss() - base) / {n})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def import_time_ms(module: str, runs: int = 5) -> float:
    def once(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - t0

    base = statistics.median(once("pass") for _ in range(runs))
    return (statistics.median(once(f"import {module}") for _ in range(runs)) - base) * 1e3


def installed_size_mb(module: Any) -> float:
    root = os.path.dirname(module.__file__)
    total = 0
    for d, _, files in os.walk(root):
        total += sum(os.path.getsize(os.path.join(d, f)) for f in files)
    return total / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("workloads", nargs="*")
    ap.add_argument(
        "--ops", action="store_true", help="also every nn.functional op alone (NN_OPS)"
    )
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--no-extras", action="store_true", help="skip RSS, import time and size")
    opts = ap.parse_args()
    if not opts.workloads:
        opts.workloads = DEFAULT_WORKLOADS + (list(NN_OPS) if opts.ops else [])
    unknown = [w for w in opts.workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    reps = 5 if opts.quick else 15
    torch_version = torch.__version__ if torch else "not installed"
    print(f"threads: {THREADS}  torch: {torch_version}  numpy: {np.__version__}")
    cols = ("ferrograd", "torch", "numpy")
    header = f"{'workload':16} {'figure':8} " + " ".join(f"{c:>10}" for c in cols)
    header += f" {'fg/torch':>9} {'goal':>6}"
    print(header)
    print("-" * len(header))
    for name in opts.workloads:
        r = run_workload(name, reps)
        spec, med = r["spec"], r["median"]
        ratio = med["ferrograd"] / med["torch"] if "torch" in med else None
        goal = WORKLOADS[name][1]
        ok = "" if ratio is None else ("ok" if ratio <= goal else "MISS")
        cells = [fmt_figure(spec, med.get(k)) for k in ("ferrograd", "torch", "numpy")]
        ratio_s = "-" if ratio is None else f"{ratio:.2f}"
        row = f"{name:16} {spec['unit']:8} " + " ".join(f"{c:>10}" for c in cells)
        print(row + f" {ratio_s:>9} {goal:>6.2f} {ok}")
        if "peak" in spec:
            print(f"{'':16} peak RSS " + _peak_cells(spec["peak"]))
        if "flops" in spec and not spec.get("rate"):
            gf = spec["flops"] / med["ferrograd"] / 1e9
            tg = f", torch {spec['flops'] / med['torch'] / 1e9:.1f}" if "torch" in med else ""
            print(f"{'':16} GFLOP/s  ferrograd {gf:.1f}{tg}")
    if "wide_graph" in opts.workloads and THREADS > 1:
        sc = thread_scaling("wide_graph", reps)
        print(
            f"{'wide_graph threads':22} ferrograd 1 thread {sc[1] * 1e3:.1f} ms, {THREADS} threads "
            f"{sc[THREADS] * 1e3:.1f} ms: {sc[1] / sc[THREADS]:.2f}x (goal >= 1.70x)"
        )
    if opts.no_extras:
        return
    chain = (
        "import {m} as L\nx = L.ones(16, requires_grad=True)\ny = x\n"
        "for _ in range(100000):\n    y = (y * 0.999).tanh()\ny.sum().backward()\n"
    )
    mlp = (
        "import numpy as np, {m} as L\nr = np.random.default_rng(0)\n"
        "dims = [(784, 512), (512, 512), (512, 10)]\n"
        "W = [L.tensor(r.standard_normal(d).astype('f') * 0.05).requires_grad_() for d in dims]\n"
        "x = L.tensor(r.standard_normal((128, 784)).astype('f'))\n"
        "for _ in range(5):\n    h = x\n    for i, w in enumerate(W):\n"
        "        h = h @ w\n        h = h.relu() if i < 2 else h\n    (h * h).mean().backward()\n"
    )
    libs = ["ferrograd"] + (["torch"] if torch is not None else [])
    for label, code in (("peak RSS mlp_train", mlp), ("peak RSS 100k chain", chain)):
        cells = "  ".join(f"{m} {peak_rss_mb(code.format(m=m)):.0f} MB" for m in libs)
        print(f"{label:22} {cells}")
    per_op = "  ".join(f"{m} {bytes_per_recorded_op(m):.0f} B" for m in libs)
    print(f"{'bytes per recorded op':22} {per_op}  (1M-op chain, 1 element)")
    print(f"{'import time':22} " + "  ".join(f"{m} {import_time_ms(m):.0f} ms" for m in libs))
    print(f"{'installed size':22} ferrograd {installed_size_mb(fg):.1f} MB")


if __name__ == "__main__":
    main()
