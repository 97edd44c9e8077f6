# Forward hooks that record activations, and named_parameters / state_dict inspection.
import ferrograd as torch
import numpy as np
from ferrograd import nn

rng = np.random.default_rng(7)
model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.5, 0.5, tuple(param.shape)), dtype=param.dtype))

activations = {}


def save_output(name):
    def hook(module, inputs, output):
        activations[name] = output.detach()
    return hook


handles = [layer.register_forward_hook(save_output(str(i))) for i, layer in enumerate(model)]
X = torch.tensor(rng.standard_normal((10, 3)), dtype=torch.float32)
Y = torch.tensor(rng.integers(0, 2, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
for step in range(40):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(X), Y)
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(step, loss.item())
for h in handles:
    h.remove()
print(sorted(activations), [tuple(a.shape) for a in activations.values()])
print([name for name, _ in model.named_parameters()])
print(list(model.state_dict().keys()))
print("final", loss.item())
