# "Learning PyTorch with Examples", PyTorch: optim -- RMSprop.
import math

import ferrograd as torch
import numpy as np

x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
rng = np.random.default_rng(1)
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.1, 0.1, tuple(param.shape)), dtype=param.dtype))
loss_fn = torch.nn.MSELoss(reduction="sum")

learning_rate = 1e-3
optimizer = torch.optim.RMSprop(model.parameters(), lr=learning_rate)
for t in range(2000):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    if t % 500 == 99:
        print(t, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print("final", loss.item())
