# "Learning PyTorch with Examples", PyTorch: nn -- Sequential(Linear, Flatten), MSELoss, and a
# manual step.
import math

import ferrograd as torch
import numpy as np

x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
loss_fn = torch.nn.MSELoss(reduction="sum")

# Same starting weights for torch and ferrograd (the tutorial draws them at random).
rng = np.random.default_rng(0)
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.1, 0.1, tuple(param.shape)), dtype=param.dtype))

learning_rate = 1e-6
for t in range(2000):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    if t % 500 == 99:
        print(t, loss.item())
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad

linear_layer = model[0]
print(f"Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x")
print("final", loss.item())
