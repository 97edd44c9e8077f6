"""Peak memory of a 16-layer MLP's forward + backward with and without `checkpoint`, for two
kinds of layer and several segment lengths, each run in a fresh process. Two figures: the peak
of the bytes tensors own (`ferrograd.cpu.max_memory_allocated`, what `torch.cuda`'s counter
measures on a GPU: saved activations, gradients) and the peak RSS, which also holds what the
allocator keeps cached; both as growth over the inputs and weights. torch side by side when
installed (RSS only: torch counts no CPU tensor bytes).

    python benches/checkpoint_memory.py [ferrograd|torch ...]

Segments of 8, 4 and 2 layers, and `nested`: a binary tree of checkpoints (each half of the
network checkpointed, recursively, down to two layers), which keeps one boundary per level.

Layers: `tanh` is `(x @ w).tanh()` (one activation saved per layer); `block` is
`gelu(layer_norm(x @ w))` (three). Width 256, batch 4096, float32.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Tuple

CHILD = r"""
import importlib, sys
import numpy as np
lib, variant, seg = sys.argv[1], sys.argv[2], int(sys.argv[3])
L = importlib.import_module(lib)
importlib.import_module(lib + ".utils.checkpoint")
F = L.nn.functional
r = np.random.default_rng(0)
width, depth, batch = 256, 16, 4096
ws = [L.tensor((r.standard_normal((width, width)) / width**0.5).astype("f")).requires_grad_()
      for _ in range(depth)]
x = L.tensor(r.standard_normal((batch, width)).astype("f"))

def layer(x, w):
    return (x @ w).tanh() if variant == "tanh" else F.gelu(F.layer_norm(x @ w, (width,)))

def segment(a, b):
    def f(x):
        for w in ws[a:b]:
            x = layer(x, w)
        return x
    return f

def nested(a, b):
    # A binary tree of checkpoints down to two layers: one boundary kept per level.
    if b - a <= 2:
        return segment(a, b)
    m = (a + b) // 2
    lo, hi = nested(a, m), nested(m, b)
    def f(x):
        x = L.utils.checkpoint.checkpoint(lo, x, use_reentrant=False)
        return L.utils.checkpoint.checkpoint(hi, x, use_reentrant=False)
    return f

def run(x):
    if seg == -1:
        return nested(0, depth)(x)
    if seg == 0:
        return segment(0, depth)(x)
    for a in range(0, depth, seg):
        x = L.utils.checkpoint.checkpoint(segment(a, a + seg), x, use_reentrant=False)
    return x

def kb(key):
    return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith(key)))

counted = hasattr(L.cpu, "max_memory_allocated")  # torch counts CPU tensors nowhere
base = kb("VmRSS")
if counted:
    L.cpu.reset_peak_memory_stats()
    tensors = L.cpu.memory_allocated()
for _ in range(3):
    run(x).sum().backward()
rss = (kb("VmHWM") - base) / 1024
print(rss, (L.cpu.max_memory_allocated() - tensors) / 2**20 if counted else "nan")
"""


def growth(lib: str, variant: str, seg: int) -> Tuple[float, float]:
    """(peak RSS growth, peak tensor-bytes growth) in MB; the second is nan for torch."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, lib, variant, str(seg)],
        check=True,
        capture_output=True,
        text=True,
    )
    rss, tensors = out.stdout.split()[-2:]
    return float(rss), float(tensors)


def main() -> None:
    libs = sys.argv[1:] or ["ferrograd"]
    print(
        f"{'library':10} {'layers':6} {'segment':>8} {'peak tensors':>13} {'vs none':>8}"
        f" {'peak RSS':>10} {'vs none':>8}"
    )
    for lib in libs:
        for variant in ("tanh", "block"):
            none_rss, none_t = growth(lib, variant, 0)
            for seg in (0, 8, 4, 2, -1):
                rss, t = (none_rss, none_t) if seg == 0 else growth(lib, variant, seg)
                name = {0: "none", -1: "nested"}.get(seg, str(seg))
                print(
                    f"{lib:10} {variant:6} {name:>8} {t:10.0f} MB {t / none_t:8.2f}"
                    f" {rss:7.0f} MB {rss / none_rss:8.2f}"
                )


if __name__ == "__main__":
    main()
