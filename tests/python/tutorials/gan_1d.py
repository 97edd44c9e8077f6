# A small GAN on 1-D data: two nn.Sequential nets, BCEWithLogitsLoss, two Adams, detach().
import ferrograd as torch
import numpy as np
from ferrograd import nn

rng = np.random.default_rng(5)


def init(model):
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(param.shape)), dtype=param.dtype))
    return model


G = init(nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
D = init(nn.Sequential(nn.Linear(1, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
real_label, fake_label = torch.ones(128, 1), torch.zeros(128, 1)

for step in range(300):
    real = torch.tensor(rng.normal(3.0, 0.5, (128, 1)), dtype=torch.float32)
    z = torch.tensor(rng.standard_normal((128, 4)), dtype=torch.float32)
    fake = G(z)
    opt_d.zero_grad()
    d_loss = bce(D(real), real_label) + bce(D(fake.detach()), fake_label)
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = bce(D(fake), real_label)
    g_loss.backward()
    opt_g.step()
    if step % 100 == 0:
        print(step, abs(fake.mean().item() - 3.0))  # how far the fakes' mean is from the data's

with torch.no_grad():
    samples = G(torch.tensor(rng.standard_normal((2000, 4)), dtype=torch.float32))
print("generated mean", samples.mean().item(), "std", samples.std().item())
print("final", abs(samples.mean().item() - 3.0))
