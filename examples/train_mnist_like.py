"""Train a small CNN and an MLP on generated digit-like images, the way PyTorch scripts do:
nn.Module models, AdamW, a learning-rate schedule, a DataLoader, a progress bar, a loss plot,
and a checkpoint that reloads to the same accuracy. Run: python examples/train_mnist_like.py

No downloads: the images are strokes (bars, diagonals, crosses, boxes) on a 12x12 canvas, with
noise and random shifts. Swap the import for `import torch` and it runs on torch unchanged.
"""

import io
import sys
import time

import ferrograd as torch
import numpy as np
from ferrograd import nn
from ferrograd.utils.data import DataLoader, TensorDataset

try:
    from tqdm import tqdm
except ImportError:  # a plain line per epoch instead of a bar
    tqdm = None

SIZE, CLASSES = 12, 5


def make_images(n, rng):
    """n noisy 12x12 images of five stroke classes, and their labels."""
    labels = rng.integers(0, CLASSES, n)
    images = np.zeros((n, 1, SIZE, SIZE), dtype=np.float32)
    for i, c in enumerate(labels):
        img = images[i, 0]
        r, k = rng.integers(2, SIZE - 2, 2)
        if c == 0:
            img[r, 2:-2] = 1  # horizontal bar
        elif c == 1:
            img[2:-2, k] = 1  # vertical bar
        elif c == 2:
            np.fill_diagonal(img[1:-1, 1:-1], 1)  # diagonal
        elif c == 3:
            img[r, 2:-2] = 1  # cross
            img[2:-2, k] = 1
        else:
            img[3, 3:-3] = img[-4, 3:-3] = img[3:-3, 3] = img[3:-3, -4] = 1  # box
        shift = rng.integers(-1, 2, 2)
        images[i, 0] = np.roll(img, shift, axis=(0, 1))
    images += rng.normal(0, 0.3, images.shape).astype(np.float32)
    return torch.tensor(images), torch.tensor(labels)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 3 * 3, CLASSES)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def mlp():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(SIZE * SIZE, 64), nn.ReLU(), nn.Linear(64, CLASSES)
    )


def accuracy(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / total


def train(name, model, train_loader, test_loader, epochs=8):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    criterion = nn.CrossEntropyLoss()
    losses = []
    start = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        batches = train_loader if tqdm is None else tqdm(
            train_loader, desc=f"{name} epoch {epoch + 1}/{epochs}", leave=False
        )
        for x, y in batches:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        print(
            f"{name} epoch {epoch + 1}: loss {np.mean(losses[-len(train_loader):]):.4f}, "
            f"test accuracy {accuracy(model, test_loader):.3f}, lr {scheduler.get_last_lr()[0]:.5f}"
        )
    print(f"{name}: {time.perf_counter() - start:.1f} s")
    return losses


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x_train, y_train = make_images(2000, rng)
    x_test, y_test = make_images(500, rng)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
    test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=250)

    curves = {}
    for name, model in (("cnn", CNN()), ("mlp", mlp())):
        curves[name] = train(name, model, train_loader, test_loader)
        before = accuracy(model, test_loader)
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        buf.seek(0)
        reloaded = CNN() if name == "cnn" else mlp()
        reloaded.load_state_dict(torch.load(buf))
        after = accuracy(reloaded, test_loader)
        print(f"{name}: accuracy {before:.3f}, after save and reload {after:.3f}")
        if after != before:
            sys.exit(f"{name}: the reloaded model disagrees")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        for name, losses in curves.items():
            plt.plot(losses, label=name)
        plt.xlabel("step")
        plt.ylabel("cross-entropy")
        plt.legend()
        plt.savefig("train_mnist_like_loss.png")
        print("loss plot: train_mnist_like_loss.png")
    except ImportError:
        print("matplotlib not installed: no loss plot")


if __name__ == "__main__":
    main()
