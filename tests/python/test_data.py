"""ferrograd.utils.data: datasets, samplers, collation and the DataLoader, in and out of worker
processes; Generator/randperm; tensor pickling. Checked against closed forms, and against torch's
own utils.data when it is installed."""

import collections
import copy
import pickle

import ferrograd as fg
import numpy as np
import pytest
from ferrograd.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    get_worker_info,
    random_split,
)


def dataset(n=10):
    return TensorDataset(fg.arange(2.0 * n).reshape(n, 2), fg.arange(n))


# ----- randperm and Generator -------------------------------------------------------------------


def test_randperm_is_a_permutation_and_generator_seeds_repeat():
    for n in (0, 1, 7, 1000):
        p = fg.randperm(n).tolist()
        assert sorted(p) == list(range(n))
    a = fg.randperm(50, generator=fg.Generator().manual_seed(3)).tolist()
    b = fg.randperm(50, generator=fg.Generator().manual_seed(3)).tolist()
    c = fg.randperm(50, generator=fg.Generator().manual_seed(4)).tolist()
    assert a == b and a != c
    g = fg.Generator().manual_seed(3)
    first, second = fg.randperm(50, generator=g).tolist(), fg.randperm(50, generator=g).tolist()
    assert first == a and second != first
    state = g.get_state()
    third = fg.randperm(50, generator=g).tolist()
    assert fg.randperm(50, generator=g.set_state(state)).tolist() == third


def test_randperm_global_stream_follows_manual_seed():
    fg.manual_seed(11)
    a = fg.randperm(30).tolist()
    fg.manual_seed(11)
    assert fg.randperm(30).tolist() == a


def test_randperm_rejects_negative_n():
    with pytest.raises(RuntimeError, match="non-negative"):
        fg.randperm(-1)


# ----- datasets -----------------------------------------------------------------------------------


def test_tensor_dataset_items_and_size_mismatch():
    ds = dataset(4)
    x, y = ds[2]
    assert x.tolist() == [4.0, 5.0] and y.item() == 2 and len(ds) == 4
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(fg.zeros(3), fg.zeros(4))


def test_random_split_by_lengths_and_fractions_covers_disjointly():
    ds = dataset(10)
    parts = random_split(ds, [3, 7], generator=fg.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    parts = random_split(ds, [0.5, 0.3, 0.2])
    assert [len(p) for p in parts] == [5, 3, 2]
    # 11 items in thirds: floors 3, 3, 3 and the two left over dealt from the first.
    assert [len(p) for p in random_split(dataset(11), [1 / 3] * 3)] == [4, 4, 3]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(ds, [3, 3])


def test_concat_and_subset():
    both = dataset(3) + dataset(2)
    assert len(both) == 5 and both[3][1].item() == 0 and both[-1][1].item() == 1
    sub = Subset(dataset(5), [4, 0])
    assert len(sub) == 2 and sub[0][1].item() == 4


# ----- collation ----------------------------------------------------------------------------------


Point = collections.namedtuple("Point", "x y")


def test_default_collate_structures():
    out = default_collate([{"a": 1, "b": (2.0, "s")}, {"a": 3, "b": (4.0, "t")}])
    assert out["a"].tolist() == [1, 3] and out["a"].dtype == fg.int64
    assert out["b"][0].tolist() == [2.0, 4.0] and out["b"][0].dtype == fg.float64
    assert out["b"][1] == ["s", "t"]
    p = default_collate([Point(1, 2), Point(3, 4)])
    assert isinstance(p, Point) and p.x.tolist() == [1, 3]
    arrs = default_collate([np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32)])
    assert tuple(arrs.shape) == (2, 2, 2) and arrs.dtype == fg.float32
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        default_collate([[1, 2], [3]])


def test_default_collate_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as tdc

    batch = [
        {"x": np.arange(3.0), "y": 1, "z": [1.5, 2]},
        {"x": np.arange(3.0), "y": 2, "z": [2.5, 3]},
    ]
    ours, theirs = default_collate(batch), tdc(batch)
    np.testing.assert_array_equal(ours["x"].numpy(), theirs["x"].numpy())
    assert str(ours["x"].dtype).split(".")[-1] == str(theirs["x"].dtype).split(".")[-1]
    assert ours["y"].tolist() == theirs["y"].tolist()
    assert [t.tolist() for t in ours["z"]] == [t.tolist() for t in theirs["z"]]
    assert torch is not None


# ----- DataLoader ---------------------------------------------------------------------------------


def batches(loader):
    return [yb.tolist() for _, yb in loader]


def test_sequential_batches_and_drop_last():
    assert batches(DataLoader(dataset(10), batch_size=4)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    dl = DataLoader(dataset(10), batch_size=4, drop_last=True)
    assert batches(dl) == [[0, 1, 2, 3], [4, 5, 6, 7]] and len(dl) == 2
    assert len(DataLoader(dataset(10), batch_size=4)) == 3


def test_shuffle_permutes_each_epoch_and_generator_repeats():
    dl = DataLoader(
        dataset(20), batch_size=5, shuffle=True, generator=fg.Generator().manual_seed(0)
    )
    e1, e2 = sum(batches(dl), []), sum(batches(dl), [])
    assert sorted(e1) == list(range(20)) and sorted(e2) == list(range(20)) and e1 != e2
    again = DataLoader(
        dataset(20), batch_size=5, shuffle=True, generator=fg.Generator().manual_seed(0)
    )
    assert sum(batches(again), []) == e1


def test_batch_size_none_and_custom_collate():
    dl = DataLoader(dataset(3), batch_size=None)
    assert [y.item() for _, y in dl] == [0, 1, 2]
    dl = DataLoader(dataset(4), batch_size=2, collate_fn=lambda b: len(b))
    assert list(dl) == [2, 2]


class Squares(Dataset):
    def __len__(self):
        return 9

    def __getitem__(self, i):
        info = get_worker_info()
        return i * i, -1 if info is None else info.id


def test_workers_give_the_same_batches_in_order():
    single = list(DataLoader(Squares(), batch_size=2))
    multi = list(DataLoader(Squares(), batch_size=2, num_workers=2))
    assert [b[0].tolist() for b in multi] == [b[0].tolist() for b in single]
    assert {w for b in multi for w in b[1].tolist()} == {0, 1}
    assert all(w == -1 for b in single for w in b[1].tolist())


class Broken(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise KeyError("no item 2")
        return i


def test_worker_error_is_reraised_with_its_type():
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process"):
        list(DataLoader(Broken(), batch_size=1, num_workers=2))


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(7))


def test_iterable_dataset_batches():
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(), shuffle=True)


class Sharded(IterableDataset):
    """torch's documented pattern: each worker takes its own slice of range(start, end)."""

    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.start, self.end))
        per = -(-(self.end - self.start) // info.num_workers)
        lo = self.start + info.id * per
        return iter(range(lo, min(lo + per, self.end)))


def test_iterable_dataset_in_workers_takes_batches_in_turn():
    # worker 0 streams 0..3, worker 1 streams 4..6: batches alternate until one runs dry
    got = [b.tolist() for b in DataLoader(Sharded(0, 7), batch_size=2, num_workers=2)]
    assert got == [[0, 1], [4, 5], [2, 3], [6]]
    # without sharding every worker yields the whole stream (torch's documented duplication)
    got = [b.tolist() for b in DataLoader(Stream(), batch_size=3, num_workers=2)]
    assert got == [[0, 1, 2], [0, 1, 2], [3, 4, 5], [3, 4, 5], [6], [6]]
    got = [b.tolist() for b in DataLoader(Stream(), batch_size=3, num_workers=2, drop_last=True)]
    assert got == [[0, 1, 2], [0, 1, 2], [3, 4, 5], [3, 4, 5]]
    assert [int(x) for x in DataLoader(Sharded(0, 5), batch_size=None, num_workers=3)] == [
        0,
        2,
        4,
        1,
        3,
    ]


def test_iterable_dataset_in_workers_matches_torch():
    torch = pytest.importorskip("torch")
    tdata = torch.utils.data

    class TorchSharded(tdata.IterableDataset):
        def __iter__(self):
            info = tdata.get_worker_info()
            per = -(-11 // info.num_workers)
            return iter(range(info.id * per, min(info.id * per + per, 11)))

    class OurSharded(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            per = -(-11 // info.num_workers)
            return iter(range(info.id * per, min(info.id * per + per, 11)))

    for workers in (2, 3):
        ours = [b.tolist() for b in DataLoader(OurSharded(), batch_size=2, num_workers=workers)]
        theirs = [
            b.tolist() for b in tdata.DataLoader(TorchSharded(), batch_size=2, num_workers=workers)
        ]
        assert ours == theirs


class BrokenStream(IterableDataset):
    def __iter__(self):
        yield 1
        raise ValueError("stream broke")


def test_iterable_worker_error_is_reraised():
    with pytest.raises(ValueError, match="Caught ValueError in DataLoader worker process"):
        list(DataLoader(BrokenStream(), batch_size=1, num_workers=2))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_workers": -1}, "num_workers option should be non-negative"),
        ({"sampler": [0, 1], "shuffle": True}, "sampler option is mutually exclusive with shuffle"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
        ({"batch_size": None, "drop_last": True}, "batch_size=None option disables auto-batching"),
    ],
)
def test_loader_option_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(dataset(4), **kwargs)


def test_loader_option_errors_match_torch():
    pytest.importorskip("torch")
    import torch
    from torch.utils.data import DataLoader as TDL
    from torch.utils.data import TensorDataset as TTD

    tds = TTD(torch.zeros(4))
    for kwargs in (
        {"num_workers": -1},
        {"sampler": [0, 1], "shuffle": True},
        {"batch_sampler": [[0]], "batch_size": 2},
    ):
        with pytest.raises(ValueError) as theirs:
            TDL(tds, **kwargs)
        with pytest.raises(ValueError) as ours:
            DataLoader(dataset(4), **kwargs)
        assert str(ours.value) == str(theirs.value)


def test_batch_sampler_errors():
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(SequentialSampler(range(3)), 0, False)


# ----- pickling ---------------------------------------------------------------------------


def test_tensor_pickle_and_deepcopy_round_trip_bit_for_bit():
    for t in (
        fg.randn(3, 4, dtype=fg.float64),
        fg.arange(6).reshape(2, 3).t(),
        fg.tensor([True, False]),
        fg.ones(1, 3).expand(2, 3),
    ):
        back = pickle.loads(pickle.dumps(t))
        assert back.dtype == t.dtype and tuple(back.shape) == tuple(t.shape)
        assert back.numpy().tobytes() == t.contiguous().numpy().tobytes()
    leaf = fg.randn(3, requires_grad=True)
    clone = copy.deepcopy(leaf)
    assert clone.requires_grad and clone.is_leaf and clone is not leaf
    assert clone.detach().numpy().tobytes() == leaf.detach().numpy().tobytes()
    clone.sum().backward()
    assert leaf.grad is None and clone.grad.tolist() == [1.0, 1.0, 1.0]
