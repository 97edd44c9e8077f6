# Checkpointing as scripts do it: save model and optimizer state dicts, load, resume training.
import io

import ferrograd as torch
import numpy as np
from ferrograd import nn

rng = np.random.default_rng(4)
X = torch.tensor(rng.standard_normal((128, 5)), dtype=torch.float32)
Y = torch.tensor(rng.standard_normal((128, 2)), dtype=torch.float32)


def make():
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


model, optimizer = make()
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(param.shape)), dtype=param.dtype))
loss_fn = nn.MSELoss()
for step in range(30):
    optimizer.zero_grad()
    loss = loss_fn(model(X), Y)
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(step, loss.item())

buf = io.BytesIO()
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 30}, buf)
buf.seek(0)
checkpoint = torch.load(buf)
model2, optimizer2 = make()
model2.load_state_dict(checkpoint["model"])
optimizer2.load_state_dict(checkpoint["optimizer"])
for _ in range(checkpoint["step"], 60):
    for m, opt in ((model, optimizer), (model2, optimizer2)):
        opt.zero_grad()
        loss = loss_fn(m(X), Y)
        loss.backward()
        opt.step()
with torch.no_grad():
    gap = (model(X) - model2(X)).abs().max().item()
print("resumed model differs by", gap)
assert gap == 0.0
print("final", loss.item())
