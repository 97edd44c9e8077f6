# A character-level language model as the "generating names" tutorials write one: nn.Embedding,
# a two-layer GRU (batch_first) carrying its hidden state, a linear decoder over the vocabulary,
# CrossEntropyLoss on next-character prediction, SGD with momentum and a StepLR schedule.
import ferrograd as torch
import ferrograd.nn as nn
import numpy as np

rng = np.random.default_rng(1)
text = "the quick brown fox jumps over the lazy dog and then the dog naps " * 8
chars = sorted(set(text))
index = {ch: i for i, ch in enumerate(chars)}
data = np.array([index[ch] for ch in text], dtype=np.int64)
SEQ, BATCH = 24, 16
starts = rng.integers(0, len(data) - SEQ - 1, BATCH)
inputs = torch.tensor(np.stack([data[s : s + SEQ] for s in starts]))
targets = torch.tensor(np.stack([data[s + 1 : s + SEQ + 1] for s in starts]))


class CharRNN(nn.Module):
    def __init__(self, vocab, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.gru = nn.GRU(16, hidden, num_layers=2, batch_first=True, dropout=0.0)
        self.decode = nn.Linear(hidden, vocab)

    def forward(self, x, hidden=None):
        out, hidden = self.gru(self.embed(x), hidden)
        return self.decode(out), hidden


model = CharRNN(len(chars))
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.25, 0.25, tuple(param.shape)), dtype=param.dtype))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.5)

for step in range(80):
    optimizer.zero_grad()
    logits, hidden = model(inputs)
    loss = criterion(logits.reshape(-1, len(chars)), targets.reshape(-1))
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    if step % 20 == 0:
        print(step, loss.item())

# greedy generation, feeding the hidden state back in
with torch.no_grad():
    x = torch.tensor([[index["t"]]])
    hidden, out = None, "t"
    for _ in range(20):
        logits, hidden = model(x, hidden)
        x = logits[:, -1].argmax(dim=-1, keepdim=True)
        out += chars[x.item()]
print("sample", out)
print("final", loss.item())
