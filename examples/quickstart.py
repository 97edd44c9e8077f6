"""Fit a 2-layer MLP to y = sin(3x) * x with plain autograd and a hand-written SGD step, then
check one gradient against central finite differences.

Run: python examples/quickstart.py
"""

import ferrograd as torch  # the same code runs with `import torch`
import numpy as np

torch.manual_seed(0)
rng = np.random.default_rng(0)

x = torch.tensor(rng.uniform(-2.0, 2.0, size=(256, 1)), dtype=torch.float32)
y = (x * 3.0).sin() * x

hidden = 32
w1 = (torch.randn(1, hidden) * 1.0).requires_grad_()
b1 = torch.zeros(hidden, requires_grad=True)
w2 = (torch.randn(hidden, 1) * (1.0 / hidden**0.5)).requires_grad_()
b2 = torch.zeros(1, requires_grad=True)
params = [w1, b1, w2, b2]


def model(inp):
    return (inp @ w1 + b1).tanh() @ w2 + b2


lr, momentum = 0.05, 0.9
velocity = [torch.zeros_like(p) for p in params]
for step in range(1, 3001):
    loss = ((model(x) - y) ** 2).mean()
    for p in params:
        p.grad = None
    loss.backward()
    with torch.no_grad():  # SGD with momentum, by hand
        for p, v in zip(params, velocity):
            v.mul_(momentum).add_(p.grad)
            p -= lr * v
    if step == 1 or step % 500 == 0:
        print(f"step {step:5d}  loss {loss.item():.5f}")

final = loss.item()
assert final < 0.01, f"training did not converge (loss {final})"

# Gradient check in float64: d loss / d w2[3, 0] by autograd vs central differences.
xd, yd = x.double(), y.double()
w1d, b1d, b2d = w1.detach().double(), b1.detach().double(), b2.detach().double()


def loss_of(w2_value):
    return (((xd @ w1d + b1d).tanh() @ w2_value + b2d - yd) ** 2).mean()


w2d = w2.detach().double().requires_grad_()
(analytic,) = torch.autograd.grad(loss_of(w2d), w2d)
eps = 1e-6
base = w2.detach().double().numpy()
plus, minus = base.copy(), base.copy()
plus[3, 0] += eps
minus[3, 0] -= eps
numeric = (loss_of(torch.tensor(plus)).item() - loss_of(torch.tensor(minus)).item()) / (2 * eps)
print(f"d loss / d w2[3,0]: autograd {analytic[3, 0].item():.8f}  finite differences {numeric:.8f}")
assert abs(analytic[3, 0].item() - numeric) < 1e-6 * max(1.0, abs(numeric))
print("gradient check passed")
