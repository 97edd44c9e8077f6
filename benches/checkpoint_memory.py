"""Peak memory of a 16-layer MLP's forward + backward with and without `checkpoint`, for two
kinds of layer and several segment lengths (each run in a fresh process; the figure is the
growth of the peak RSS over the inputs and weights). torch side by side when installed.

    python benches/checkpoint_memory.py [ferrograd|torch ...]

Layers: `tanh` is `(x @ w).tanh()` (one activation saved per layer); `block` is
`gelu(layer_norm(x @ w))` (three). Width 256, batch 4096, float32.
"""

from __future__ import annotations

import subprocess
import sys

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

def run(x):
    if seg == 0:
        return segment(0, depth)(x)
    for a in range(0, depth, seg):
        x = L.utils.checkpoint.checkpoint(segment(a, a + seg), x, use_reentrant=False)
    return x

def kb(key):
    return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith(key)))

base = kb("VmRSS")
for _ in range(3):
    run(x).sum().backward()
print((kb("VmHWM") - base) / 1024)
"""


def growth(lib: str, variant: str, seg: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, lib, variant, str(seg)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.split()[-1])


def main() -> None:
    libs = sys.argv[1:] or ["ferrograd"]
    print(f"{'library':10} {'layers':6} {'segment':>8} {'peak growth':>12} {'vs none':>8}")
    for lib in libs:
        for variant in ("tanh", "block"):
            none = growth(lib, variant, 0)
            print(f"{lib:10} {variant:6} {'none':>8} {none:10.0f} MB {1:8.2f}")
            for seg in (8, 4, 2):
                g = growth(lib, variant, seg)
                print(f"{lib:10} {variant:6} {seg:8d} {g:10.0f} MB {g / none:8.2f}")


if __name__ == "__main__":
    main()
