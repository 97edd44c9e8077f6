"""Variable-length sequences, as ``torch.nn.utils.rnn``: ``PackedSequence``,
``pack_padded_sequence``, ``pad_packed_sequence``, ``pad_sequence``, ``pack_sequence``,
``unpack_sequence``, ``unpad_sequence``. Packing is a reordering (``index_select`` over the
flattened steps), so gradients flow through it; the recurrent layers run a packed batch in the
crate."""

from __future__ import annotations

from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ... import _C

Tensor = _C.Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


def _fg() -> Any:
    import ferrograd

    return ferrograd


class PackedSequence(NamedTuple):
    """A batch of sequences of different lengths, time-major and sorted by decreasing length:
    ``data`` holds step 0 of every sequence, then step 1 of those still running, and so on;
    ``batch_sizes[t]`` is how many run at step ``t``."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor] = None
    unsorted_indices: Optional[Tensor] = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return self._replace(data=self.data.to(*args, **kwargs))

    def double(self) -> PackedSequence:
        return self._replace(data=self.data.double())

    def float(self) -> PackedSequence:
        return self._replace(data=self.data.float())

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation: Optional[Tensor]) -> Optional[Tensor]:
    """The inverse of a permutation given as a 1-D index tensor: ``arange`` scattered to the
    permutation's positions (as torch does)."""
    if permutation is None:
        return None
    fg = _fg()
    return fg.zeros_like(permutation).scatter(0, permutation, fg.arange(permutation.numel()))


def _lengths_list(lengths: Union[Tensor, Sequence[int]]) -> List[int]:
    if isinstance(lengths, Tensor):
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def _batch_sizes(lengths: List[int]) -> List[int]:
    """How many (decreasingly sorted) sequences run at each step."""
    return [sum(1 for n in lengths if n > t) for t in range(lengths[0] if lengths else 0)]


def _packed_rows(batch_sizes: List[int], batch: int) -> List[int]:
    """Row of a flattened ``(steps * batch)`` padded tensor for every element of ``data``."""
    return [t * batch + b for t, n in enumerate(batch_sizes) for b in range(n)]


def pack_padded_sequence(
    input: Tensor,
    lengths: Union[Tensor, Sequence[int]],
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PackedSequence:
    """Packs a padded ``(T, B, *)`` batch (``(B, T, *)`` with ``batch_first``) whose sequence
    ``b`` has ``lengths[b]`` valid steps."""
    lens = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if len(lens) != input.size(batch_dim):
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} "
            f"(batch_size={input.size(batch_dim)})"
        )
    if any(n <= 0 for n in lens):
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' "
            "that is <= 0"
        )
    sorted_indices: Optional[Tensor] = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability."
            )
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])
        sorted_indices = _fg().tensor(order, dtype=_C.int64)
        input = input.index_select(batch_dim, sorted_indices)
        lens = [lens[i] for i in order]
    if lens[0] > input.size(1 - batch_dim):
        raise RuntimeError(
            f"Expected sequence length to be at most {input.size(1 - batch_dim)}, but got {lens[0]}"
        )
    if batch_first:
        input = input.transpose(0, 1)
    sizes = _batch_sizes(lens)
    steps, batch = input.size(0), input.size(1)
    flat = input.reshape(steps * batch, *input.shape[2:])
    rows = _fg().tensor(_packed_rows(sizes, batch), dtype=_C.int64)
    return PackedSequence(
        flat.index_select(0, rows),
        _fg().tensor(sizes, dtype=_C.int64),
        sorted_indices,
        invert_permutation(sorted_indices),
    )


def _unpack_sorted(
    sequence: PackedSequence, padding_value: float, total: int
) -> Tuple[Tensor, List[int]]:
    """The packed data as a ``(total, B, *)`` padded tensor in sorted order, and the lengths."""
    fg = _fg()
    sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    batch = sizes[0] if sizes else 0
    lengths = [sum(1 for n in sizes if n > b) for b in range(batch)]
    data = sequence.data
    feature = tuple(data.shape[1:])
    pad_row = fg.full((1, *feature), padding_value, dtype=data.dtype)
    source = fg.cat([data, pad_row], 0)
    # every padded position reads a data row, or the padding row at the end
    index = [data.size(0)] * (total * batch)
    for k, row in enumerate(_packed_rows(sizes, batch)):
        index[row] = k
    padded = source.index_select(0, fg.tensor(index, dtype=_C.int64))
    return padded.reshape(total, batch, *feature), lengths


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: Optional[int] = None,
) -> Tuple[Tensor, Tensor]:
    """Undoes ``pack_padded_sequence``: the padded batch in the original order, and the
    lengths (an int64 tensor)."""
    steps = sequence.batch_sizes.size(0)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    padded, lengths = _unpack_sorted(sequence, padding_value, steps)
    lens = _fg().tensor(lengths, dtype=_C.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lens = lens.index_select(0, sequence.unsorted_indices)
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, lens


def pad_sequence(
    sequences: Union[Tensor, Iterable[Tensor]],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stacks sequences of shapes ``(L_i, *)`` into ``(T, B, *)`` (``(B, T, *)`` with
    ``batch_first``), padding each to the longest with ``padding_value``."""
    if isinstance(sequences, Tensor):
        seqs = list(sequences.unbind(0))
    else:
        try:
            seqs = list(sequences)
        except TypeError:
            raise RuntimeError(
                "pad_sequence: Expected iterable for input sequences, but got arg of type: "
                f"{type(sequences)}"
            ) from None
    if padding_side not in ("left", "right"):
        raise ValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    fg = _fg()
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.size(0) for s in seqs)
    padded = []
    for s in seqs:
        missing = longest - s.size(0)
        if missing:
            fill = fg.full((missing, *s.shape[1:]), padding_value, dtype=s.dtype)
            s = fg.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return fg.stack(padded, 0 if batch_first else 1)


def unpad_sequence(
    padded_sequences: Tensor, lengths: Union[Tensor, Sequence[int]], batch_first: bool = False
) -> List[Tensor]:
    """The sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[b, :n] for b, n in enumerate(_lengths_list(lengths))]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of sequences ``(L_i, *)``."""
    lengths = [s.size(0) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> List[Tensor]:
    """The list of sequences a ``PackedSequence`` holds, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
