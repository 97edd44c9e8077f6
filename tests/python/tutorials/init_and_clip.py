# nn.init on the weights, gradient clipping each step, and a model printed as torch prints it.
import ferrograd as torch
import ferrograd.nn as nn
import numpy as np

rng = np.random.default_rng(6)
X = torch.tensor(rng.standard_normal((200, 6)), dtype=torch.float32)
Y = torch.tensor(rng.standard_normal((200, 1)), dtype=torch.float32)

model = nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.Linear(32, 1))
torch.manual_seed(0)
for m in model.modules():
    if isinstance(m, nn.Linear):
        nn.init.xavier_uniform_(m.weight)
        nn.init.zeros_(m.bias)
print(model)
with torch.no_grad():  # the same numbers on both libraries, xavier's bounds kept
    for m in model.modules():
        if isinstance(m, nn.Linear):
            bound = (6 / (m.in_features + m.out_features)) ** 0.5
            m.weight.copy_(torch.tensor(rng.uniform(-bound, bound, tuple(m.weight.shape)),
                                        dtype=torch.float32))

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(X), Y)
    loss.backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
    optimizer.step()
    if step % 25 == 0:
        print(step, loss.item())
print("final", loss.item())
