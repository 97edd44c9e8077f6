# Mini-batch training with TensorDataset + DataLoader, AdamW and a cosine schedule.
import ferrograd as torch
import numpy as np
from ferrograd import nn
from ferrograd.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(3)
X = torch.tensor(rng.standard_normal((512, 10)), dtype=torch.float32)
w = torch.tensor(rng.standard_normal((10, 1)), dtype=torch.float32)
Y = (X @ w > 0).float().squeeze(1)

loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=False)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(param.shape)), dtype=param.dtype))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
criterion = nn.BCEWithLogitsLoss()

for epoch in range(10):
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = criterion(model(xb).squeeze(1), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(xb)
    scheduler.step()
    print(epoch, total / len(loader.dataset))
print("final", total / len(loader.dataset))
