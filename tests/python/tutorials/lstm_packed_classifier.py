# A sequence classifier as NLP scripts write one: nn.Embedding, an LSTM over padded batches of
# different lengths (pack_padded_sequence / pad_packed_sequence), the final hidden state into a
# linear head, CrossEntropyLoss and Adam. Task: is the first token of the sequence also its last?
import ferrograd as torch
import ferrograd.nn as nn
import numpy as np
from ferrograd.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

rng = np.random.default_rng(0)
VOCAB, N, MAXLEN = 6, 256, 9
lengths = rng.integers(2, MAXLEN + 1, N)
tokens = np.zeros((N, MAXLEN), dtype=np.int64)
labels = rng.integers(0, 2, N)
for i, n in enumerate(lengths):
    seq = rng.integers(1, VOCAB, n)
    if labels[i]:
        seq[-1] = seq[0]
    elif seq[-1] == seq[0]:
        seq[-1] = 1 + seq[0] % (VOCAB - 1)
    tokens[i, :n] = seq


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8, padding_idx=0)
        self.lstm = nn.LSTM(8, 16, batch_first=True, bidirectional=True)
        self.head = nn.Linear(32, 2)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(
            self.embed(x), lengths, batch_first=True, enforce_sorted=False
        )
        out, (h, c) = self.lstm(packed)
        padded, _ = pad_packed_sequence(out, batch_first=True)
        assert padded.shape[1] == max(lengths)
        return self.head(torch.cat([h[0], h[1]], dim=1))


model = Classifier()
with torch.no_grad():
    for param in model.parameters():
        param.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(param.shape)), dtype=param.dtype))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
X, Y, L = torch.tensor(tokens), torch.tensor(labels), lengths.tolist()

for epoch in range(40):
    optimizer.zero_grad()
    loss = criterion(model(X, L), Y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()
    if epoch % 10 == 0:
        print(epoch, loss.item())

with torch.no_grad():
    accuracy = (model(X, L).argmax(dim=1) == Y).float().mean().item()
print("accuracy", accuracy)
print("final", loss.item())
