# The classic two-layer network (the 0.4-era "Learning PyTorch" tutorial): ReLU by clamp,
# gradients by autograd, updates under no_grad with grad.zero_().
import ferrograd as torch
import numpy as np

N, D_in, H, D_out = 64, 1000, 100, 10
rng = np.random.default_rng(0)  # numpy data, so both libraries start from the same numbers
x = torch.tensor(rng.standard_normal((N, D_in)), dtype=torch.float)
y = torch.tensor(rng.standard_normal((N, D_out)), dtype=torch.float)
w1 = torch.tensor(rng.standard_normal((D_in, H)) * 0.01, dtype=torch.float, requires_grad=True)
w2 = torch.tensor(rng.standard_normal((H, D_out)) * 0.1, dtype=torch.float, requires_grad=True)

learning_rate = 1e-4
for t in range(500):
    y_pred = x.mm(w1).clamp(min=0).mm(w2)
    loss = (y_pred - y).pow(2).sum()
    if t % 100 == 99:
        print(t, loss.item())
    loss.backward()
    with torch.no_grad():
        w1 -= learning_rate * w1.grad
        w2 -= learning_rate * w2.grad
        w1.grad.zero_()
        w2.grad.zero_()

print("final", loss.item())
