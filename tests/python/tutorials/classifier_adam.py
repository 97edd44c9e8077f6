# A classifier as most scripts write one: nn.Sequential, CrossEntropyLoss, Adam, train/eval.
import ferrograd as torch
import ferrograd.nn as nn
import numpy as np

rng = np.random.default_rng(0)
centers = rng.standard_normal((3, 8)) * 3
labels = rng.integers(0, 3, 600)
points = centers[labels] + rng.standard_normal((600, 8))
X = torch.tensor(points, dtype=torch.float32)
Y = torch.tensor(labels)

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, 3))
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.2, 0.2, tuple(param.shape)), dtype=param.dtype))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(60):
    model.train()
    optimizer.zero_grad()
    loss = criterion(model(X), Y)
    loss.backward()
    optimizer.step()
    if epoch % 20 == 0:
        print(epoch, loss.item())

model.eval()
with torch.no_grad():
    accuracy = (model(X).argmax(dim=1) == Y).float().mean().item()
print("accuracy", accuracy)
print("final", loss.item())
