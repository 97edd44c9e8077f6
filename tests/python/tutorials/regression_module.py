# Regression with an nn.Module subclass, SGD with momentum and a StepLR schedule.
import ferrograd as torch
import numpy as np
from ferrograd import nn, optim


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


rng = np.random.default_rng(2)
X = torch.tensor(rng.standard_normal((256, 4)), dtype=torch.float32)
true_w = torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
Y = X @ true_w + 0.1 * torch.tensor(rng.standard_normal((256, 1)), dtype=torch.float32)

net = Net()
with torch.no_grad():
    for param in net.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(param.shape)), dtype=param.dtype))
optimizer = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.5)
loss_fn = nn.MSELoss()
for step in range(200):
    optimizer.zero_grad()
    loss = loss_fn(net(X), Y)
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 50 == 0:
        print(step, loss.item())
print("final", loss.item())
