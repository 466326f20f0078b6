"""More of torch.utils.data: SubsetRandomSampler, WeightedRandomSampler, ChainDataset and
default_convert (what DataLoader applies to each sample when it does not batch). The random
samplers draw from oar's generator (Philox), so their sequences follow oar's seed, not torch's
(whose Mersenne Twister draws differ); the distributions are torch's."""
import collections.abc
import re

from .. import _C
from . import data as _data


def _no_generator(generator, who):
    if generator is not None:
        raise NotImplementedError(f"{who}: generator= is not offered (oar has one generator: seed it with "
                                  f"oar.manual_seed); got {type(generator).__name__}")


class SubsetRandomSampler(_data.Sampler):
    """The given indices in a random order (a permutation, so each once)."""

    def __init__(self, indices, generator=None):
        _no_generator(generator, "SubsetRandomSampler")
        self.indices, self.generator = indices, generator

    def __iter__(self):
        from .. import randperm

        for i in randperm(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(_data.Sampler):
    """num_samples indices of weights, index i with probability weights[i] / sum(weights); without
    replacement each index at most once (torch.multinomial's semantics)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        _no_generator(generator, "WeightedRandomSampler")
        from .. import as_tensor, float64

        w = as_tensor(weights, dtype=float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        self.weights, self.num_samples, self.replacement, self.generator = w, num_samples, replacement, generator

    def __iter__(self):
        from .. import multinomial

        yield from multinomial(self.weights, self.num_samples, self.replacement).tolist()

    def __len__(self):
        return self.num_samples


class ChainDataset(_data.IterableDataset):
    """Iterable datasets one after another (what `a + b` of two iterable datasets makes)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            assert isinstance(d, _data.IterableDataset), "ChainDataset only supports IterableDataset"
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            assert isinstance(d, _data.IterableDataset), "ChainDataset only supports IterableDataset"
            total += len(d)
        return total


_STRING_ARRAY = re.compile(r"[SaUO]")   # numpy dtypes of strings and objects stay arrays


def default_convert(data):
    """numpy arrays and numpy scalars into tensors, recursively through mappings, namedtuples and
    sequences (a plain tuple becomes a list, as torch); anything else as it is."""
    t = type(data)
    if isinstance(data, _C.TensorBase):
        return data
    if t.__module__ == "numpy" and t.__name__ not in ("str_", "string_", "bytes_"):
        if t.__name__ == "ndarray" and _STRING_ARRAY.search(data.dtype.str) is not None:
            return data
        from .. import as_tensor

        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            return t({k: default_convert(data[k]) for k in data})
        except TypeError:   # a mapping type that cannot be built from a dict
            return {k: default_convert(data[k]) for k in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return t(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return t([default_convert(d) for d in data])
        except TypeError:   # e.g. range
            return [default_convert(d) for d in data]
    return data


_data.SubsetRandomSampler, _data.WeightedRandomSampler = SubsetRandomSampler, WeightedRandomSampler
_data.ChainDataset, _data.default_convert = ChainDataset, default_convert
_data.IterableDataset.__add__ = lambda self, other: ChainDataset([self, other])
