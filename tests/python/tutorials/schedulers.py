# Learning-rate schedules: OneCycleLR per batch, then ReduceLROnPlateau per epoch.
import ferrograd as torch
import numpy as np
from ferrograd import nn, optim

rng = np.random.default_rng(8)
X = torch.tensor(rng.standard_normal((256, 3)), dtype=torch.float32)
Y = X @ torch.tensor([[2.0], [-1.0], [0.5]]) + 1.0

model = nn.Linear(3, 1)
with torch.no_grad():
    model.weight.zero_()
    model.bias.zero_()
optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
one_cycle = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100)
for step in range(100):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(X), Y)
    loss.backward()
    optimizer.step()
    one_cycle.step()
    if step % 25 == 0:
        print(step, loss.item())

plateau = optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=2)
for _ in range(10):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(X), Y)
    loss.backward()
    optimizer.step()
    plateau.step(loss.item())
print("lr", optimizer.param_groups[0]["lr"])
print("final", loss.item())
