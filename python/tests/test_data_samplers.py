"""oar.utils.data's samplers beside torch 1.13: DistributedSampler's index sequences (exact
without shuffling; with shuffling a permutation from seed + epoch that every rank shares, as
torch's, though drawn by another generator), SubsetRandomSampler, WeightedRandomSampler (the
sequences come from oar's Philox generator, not torch's Mersenne Twister: the distributions are
compared), ChainDataset, default_convert and the DataLoader's use of it."""
import collections

import numpy as np
import pytest

import oar
from conftest import torch_or_skip


def _dist_indices(lib, n, replicas, shuffle, drop_last, seed=0, epoch=0):
    ds = list(range(n))
    out = []
    for r in range(replicas):
        s = lib.utils.data.distributed.DistributedSampler(ds, num_replicas=replicas, rank=r, shuffle=shuffle,
                                                          seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        out.append((list(s), len(s)))
    return out


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (12, 4, False), (12, 4, True),
                                                  (2, 5, False), (7, 7, True), (17, 2, False), (17, 2, True),
                                                  (3, 8, False), (100, 6, True)])
def test_distributed_sampler_unshuffled_matches_torch(n, replicas, drop_last):
    torch = torch_or_skip()
    assert _dist_indices(oar, n, replicas, False, drop_last) == _dist_indices(torch, n, replicas, False, drop_last)


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (13, 4, False), (3, 8, False)])
def test_distributed_sampler_shuffled_as_torch(n, replicas, drop_last):
    torch = torch_or_skip()
    ours = _dist_indices(oar, n, replicas, True, drop_last, seed=5, epoch=2)
    theirs = _dist_indices(torch, n, replicas, True, drop_last, seed=5, epoch=2)
    assert [k for _, k in ours] == [k for _, k in theirs]
    # the ranks' shares, interleaved, are one permutation (padded by its own start, or cut), as torch's
    total = ours[0][1] * replicas
    merged = [ours[r][0][i] for i in range(ours[0][1]) for r in range(replicas)]
    base = merged[:min(n, total)]
    assert sorted(base) == sorted(set(base)) and set(base) <= set(range(n))
    if not drop_last:
        assert set(base) == set(range(n)) and merged[n:] == (base * replicas)[:total - n]
    # the same seed and epoch give the same order; another epoch or seed another
    assert ours == _dist_indices(oar, n, replicas, True, drop_last, seed=5, epoch=2)
    if n > 5:
        assert ours != _dist_indices(oar, n, replicas, True, drop_last, seed=5, epoch=3)
        assert ours != _dist_indices(oar, n, replicas, True, drop_last, seed=6, epoch=2)


def test_distributed_sampler_reads_the_process_group(monkeypatch):
    dist = oar.distributed
    with pytest.raises(RuntimeError, match="expected num_replicas and rank, or an initialized process group"):
        oar.utils.data.distributed.DistributedSampler(list(range(10)))
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 3)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 1)
    s = oar.utils.data.distributed.DistributedSampler(list(range(10)), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (3, 1, [1, 4, 7, 0])
    assert oar.utils.data.distributed.DistributedSampler(list(range(10)), rank=2, shuffle=False).rank == 2


def test_distributed_sampler_errors():
    torch = torch_or_skip()
    for lib in (oar, torch):
        with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
            lib.utils.data.distributed.DistributedSampler(list(range(4)), num_replicas=3, rank=3)


def test_subset_random_sampler():
    torch = torch_or_skip()
    idx = [3, 9, 4, 12, 20, 7]
    for lib in (oar, torch):
        s = lib.utils.data.SubsetRandomSampler(idx)
        draws = [list(s) for _ in range(300)]
        assert len(s) == 6 and all(sorted(d) == sorted(idx) for d in draws)
        firsts = collections.Counter(d[0] for d in draws)
        assert set(firsts) == set(idx) and min(firsts.values()) > 20   # each index first about 50 times in 300
    oar.manual_seed(3)
    a = list(oar.utils.data.SubsetRandomSampler(idx))
    oar.manual_seed(3)
    assert list(oar.utils.data.SubsetRandomSampler(idx)) == a


def _freqs(draws, n):
    c = np.bincount(np.asarray(draws), minlength=n)
    return c / c.sum()


def test_weighted_random_sampler_with_replacement():
    torch = torch_or_skip()
    w = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6, 0.0]
    p = np.array(w) / sum(w)
    for lib in (oar, torch):
        s = lib.utils.data.WeightedRandomSampler(w, 40000)
        draws = list(s)
        assert len(s) == 40000 and len(draws) == 40000
        f = _freqs(draws, len(w))
        assert f[6] == 0   # a zero weight is never drawn
        # 4 standard deviations of a binomial proportion
        assert np.all(np.abs(f - p) <= 4 * np.sqrt(p * (1 - p) / 40000) + 1e-12), (lib.__name__, f, p)


def test_weighted_random_sampler_without_replacement():
    torch = torch_or_skip()
    w = [0.9, 0.4, 0.05, 0.2, 0.3, 0.1]
    stats = {}
    for lib in (oar, torch):
        lib.manual_seed(1)
        s = lib.utils.data.WeightedRandomSampler(w, 3, replacement=False)
        runs = [list(s) for _ in range(3000)]
        assert all(len(set(r)) == 3 for r in runs)
        stats[lib.__name__] = (_freqs([r[0] for r in runs], 6), _freqs([i for r in runs for i in r], 6))
    (first_o, incl_o), (first_t, incl_t) = stats["oar"], stats["torch"]
    p = np.array(w) / sum(w)
    assert np.all(np.abs(first_o - p) < 0.04), first_o   # the first draw is weighted as with replacement
    assert np.all(np.abs(first_o - first_t) < 0.05) and np.all(np.abs(incl_o - incl_t) < 0.05), (incl_o, incl_t)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        list(oar.utils.data.WeightedRandomSampler(w, 7, replacement=False))


def test_weighted_random_sampler_errors_as_torch():
    torch = torch_or_skip()
    for args in [([1.0, 2.0], 0), ([1.0, 2.0], 3.0), ([1.0, 2.0], True), ([1.0, 2.0], 2, 1), ([[1.0], [2.0]], 2)]:
        msgs = []
        for lib in (oar, torch):
            with pytest.raises(ValueError) as e:
                lib.utils.data.WeightedRandomSampler(*args)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


class _Stream:
    def __init__(self, lib, items):
        self.lib, self.items = lib, items

    def make(self):
        lib, items = self.lib, self.items

        class S(lib.utils.data.IterableDataset):
            def __iter__(self):
                return iter(items)

            def __len__(self):
                return len(items)

        return S()


def test_chain_dataset_as_torch():
    torch = torch_or_skip()
    for lib in (oar, torch):
        a, b = _Stream(lib, [1, 2, 3]).make(), _Stream(lib, [10, 20]).make()
        chained = lib.utils.data.ChainDataset([a, b])
        assert list(chained) == [1, 2, 3, 10, 20] and len(chained) == 5
        plus = a + b
        assert type(plus).__name__ == "ChainDataset" and list(plus) == [1, 2, 3, 10, 20]
        batches = [x.tolist() for x in lib.utils.data.DataLoader(chained, batch_size=2)]
        assert batches == [[1, 2], [3, 10], [20]]
        bad = lib.utils.data.ChainDataset([a, lib.utils.data.TensorDataset(lib.ones(2))])
        with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
            list(bad)


def test_default_convert_as_torch():
    torch = torch_or_skip()
    Point = collections.namedtuple("Point", ["x", "y"])

    def sample():
        return {"a": np.arange(3, dtype=np.float32), "b": (np.int64(4), "s", [np.ones(2), 5]),
                "p": Point(np.float64(1.5), np.array(["u", "v"])), "r": range(2), "t": None, "f": 2.5}

    def shape(x):   # the structure with tensors as (kind, dtype name, values)
        if hasattr(x, "tolist") and type(x).__module__.split(".")[0] in ("torch", "oar"):
            return ("tensor", str(x.dtype).split(".")[-1], x.tolist())
        if isinstance(x, np.ndarray):
            return ("ndarray", x.tolist())
        if isinstance(x, dict):
            return {k: shape(v) for k, v in x.items()}
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return ("namedtuple", type(x).__name__, [shape(v) for v in x])
        if isinstance(x, (list, tuple)):
            return (type(x).__name__, [shape(v) for v in x])
        return ("plain", type(x).__name__, x if not isinstance(x, range) else list(x))

    from torch.utils.data import default_convert as t_convert
    assert shape(oar.utils.data.default_convert(sample())) == shape(t_convert(sample()))
    t = oar.ones(2)
    assert oar.utils.data.default_convert(t) is t
    # DataLoader without batching converts each sample, as torch's
    items = [np.full(2, i, np.float32) for i in range(3)]
    for lib in (oar, torch):
        got = list(lib.utils.data.DataLoader(items, batch_size=None))
        assert [type(x).__module__.split(".")[0] for x in got] == [lib.__name__] * 3
        assert [x.tolist() for x in got] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
