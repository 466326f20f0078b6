"""oar.utils.data: Dataset, TensorDataset, samplers and DataLoader as in torch.utils.data
(batches are collated in the calling process, or in forked worker processes with num_workers > 0;
shuffling draws from oar's generator)."""
import collections.abc
import itertools
import numbers

from .. import _C


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    def __iter__(self):
        raise NotImplementedError


class TensorDataset(Dataset):
    def __init__(self, *tensors):
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, idx):
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __len__(self):
        return sum(len(d) for d in self.datasets)

    def __getitem__(self, idx):
        if idx < 0:
            idx += len(self)
        for d in self.datasets:
            if idx < len(d):
                return d[idx]
            idx -= len(d)
        raise IndexError("index out of range")


def random_split(dataset, lengths, generator=None):
    from .. import randperm

    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-6:
        lengths = [int(n * f) for f in lengths]
        for i in range(n - sum(lengths)):
            lengths[i % len(lengths)] += 1
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = randperm(n).tolist()
    out, off = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[off:off + k]))
        off += k
    return out


class Sampler:
    def __init__(self, data_source=None):
        pass


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples = num_samples

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        from .. import randint, randperm

        n = len(self.data_source)
        if self.replacement:
            return iter(randint(0, n, (self.num_samples,)).tolist())
        return iter(randperm(n).tolist()[:self.num_samples])

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size


def default_collate(batch):
    """Stacks tensors, turns numbers into tensors, and recurses into tuples, lists and dicts."""
    from .. import stack, tensor

    elem = batch[0]
    if isinstance(elem, _C.TensorBase):
        return stack(list(batch), 0)
    if hasattr(elem, "__array_interface__") and not isinstance(elem, (str, bytes)):
        return stack([tensor(b) for b in batch], 0)
    if isinstance(elem, bool):
        return tensor(batch)
    if isinstance(elem, numbers.Integral):
        return tensor(batch)
    if isinstance(elem, numbers.Real):
        from .. import float64

        return tensor(batch, dtype=float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        return [default_collate(s) for s in zip(*batch)] if not isinstance(elem, tuple) else \
            tuple(default_collate(s) for s in zip(*batch))
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                    f"{type(elem)}")


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device=""):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.dataset, self.num_workers, self.drop_last = dataset, num_workers, drop_last
        self.worker_init_fn, self.timeout = worker_init_fn, timeout
        self.prefetch_factor = 2 if prefetch_factor is None else prefetch_factor
        self.multiprocessing_context = multiprocessing_context
        self.batch_size = batch_size
        if batch_sampler is None:
            if sampler is None:
                sampler = RandomSampler(dataset) if shuffle else SequentialSampler(dataset)
            if batch_size is not None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        from .data_more import default_convert   # unbatched samples: numpy arrays into tensors, as torch

        self.collate_fn = collate_fn or (default_collate if batch_sampler is not None else default_convert)

    def __iter__(self):
        if self.num_workers > 0:
            yield from _worker_batches(self)
            return
        if isinstance(self.dataset, IterableDataset):
            it = iter(self.dataset)
            while (batch := _next_iterable_batch(self, it)) is not _ITER_END:
                yield batch
            return
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])
            return
        for idx in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in idx])

    def __len__(self):
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)


_ITER_END = "__oar_iterable_end__"  # an IterableDataset's stream has ended (picklable)


def _next_iterable_batch(loader, it):
    """The next batch of an IterableDataset's iterator (one item when batch_size is None), or
    _ITER_END; with drop_last a short last batch is dropped."""
    if loader.batch_size is None:
        item = next(it, _ITER_END)
        return item if item is _ITER_END else loader.collate_fn(item)
    batch = list(itertools.islice(it, loader.batch_size))
    if not batch or (loader.drop_last and len(batch) < loader.batch_size):
        return _ITER_END
    return loader.collate_fn(batch)


# ---------------------------------------------------------------- worker processes
class WorkerInfo:
    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process: its id, the worker count, its seed and its dataset copy;
    None in the main process."""
    return _worker_info


def _to_wire(obj):
    """A batch as picklable numpy arrays (tensors marked so the main process rebuilds them)."""
    if isinstance(obj, _C.TensorBase):
        return ("__oar_tensor__", obj.detach().contiguous().numpy())
    if isinstance(obj, dict):
        return {k: _to_wire(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_wire(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_wire(v) for v in obj)
    return obj


def _from_wire(obj):
    from .. import from_numpy

    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str) and obj[0] == "__oar_tensor__":
        return from_numpy(obj[1])  # shares the unpickled array's memory
    if isinstance(obj, dict):
        return {k: _from_wire(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_from_wire(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_from_wire(v) for v in obj)
    return obj


def _worker_loop(loader, worker_id, seed, index_queue, result_queue):
    global _worker_info
    import traceback

    from .. import manual_seed

    manual_seed(seed)  # each worker draws its own random numbers (augmentations), as in torch
    _worker_info = WorkerInfo(worker_id, loader.num_workers, seed, loader.dataset)
    try:
        if loader.worker_init_fn is not None:
            loader.worker_init_fn(worker_id)
    except Exception:
        result_queue.put((-1, worker_id, None,
                          f"worker_init_fn in DataLoader worker {worker_id}:\n{traceback.format_exc()}"))
        return
    stream = None  # an IterableDataset: this worker's copy iterates the whole dataset, as in torch
    while True:
        job = index_queue.get()
        if job is None:
            return
        k, idx = job
        try:
            if isinstance(loader.dataset, IterableDataset):
                stream = iter(loader.dataset) if stream is None else stream
                batch = _next_iterable_batch(loader, stream)
            elif loader.batch_sampler is None:
                batch = loader.collate_fn(loader.dataset[idx])
            else:
                batch = loader.collate_fn([loader.dataset[i] for i in idx])
            result_queue.put((k, worker_id, batch if batch is _ITER_END else _to_wire(batch), None))
        except Exception:
            result_queue.put((k, worker_id, None,
                              f"DataLoader worker {worker_id}, batch {k}:\n{traceback.format_exc()}"))


def _worker_batches(loader):
    """The batches in sampler order, made by loader.num_workers processes (forked: the dataset
    is inherited, not pickled), at most prefetch_factor batches ahead per worker. For an
    IterableDataset (torch's semantics): each worker iterates its own copy (get_worker_info()
    lets the dataset split the work), batches are requested from the workers in turn and yielded
    in that order, and a worker whose stream has ended is asked no more."""
    import multiprocessing as mp
    import queue as queue_mod

    from .. import randint

    ctx = loader.multiprocessing_context or mp.get_context("fork")
    if isinstance(ctx, str):
        ctx = mp.get_context(ctx)
    base_seed = int(randint(0, 2 ** 62, ()).item())
    index_queues = [ctx.Queue() for _ in range(loader.num_workers)]
    results = ctx.Queue()
    workers = [ctx.Process(target=_worker_loop, args=(loader, w, base_seed + w, index_queues[w], results), daemon=True)
               for w in range(loader.num_workers)]
    for p in workers:
        p.start()
    n = loader.num_workers
    iterable = isinstance(loader.dataset, IterableDataset)
    jobs = None if iterable else iter(loader.batch_sampler if loader.batch_sampler is not None else loader.sampler)
    active, turn = [True] * n, 0  # iterable: the workers whose stream has not ended, whose turn is next
    sent = received = 0
    pending = {}
    try:
        def send():
            nonlocal sent, turn
            if iterable:
                if not any(active):
                    return False
                while not active[turn % n]:
                    turn += 1
                w, idx = turn % n, None
                turn += 1
            else:
                idx = next(jobs, None)
                if idx is None:
                    return False
                w = sent % n
            index_queues[w].put((sent, idx))
            sent += 1
            return True

        while sent < loader.num_workers * loader.prefetch_factor and send():
            pass
        while received < sent:
            while received not in pending:
                try:
                    k, w, data, err = results.get(timeout=loader.timeout if loader.timeout > 0 else 5.0)
                except queue_mod.Empty:
                    dead = [w for w, p in enumerate(workers) if not p.is_alive()]
                    if dead:
                        raise RuntimeError(f"DataLoader worker(s) {dead} exited unexpectedly (exit codes "
                                           f"{[workers[w].exitcode for w in dead]})") from None
                    if loader.timeout > 0:
                        raise RuntimeError(f"DataLoader timed out after {loader.timeout} seconds") from None
                    continue
                if err is not None:
                    raise RuntimeError(f"Caught an exception in {err}")
                pending[k] = (w, data)
            w, data = pending.pop(received)
            received += 1
            if isinstance(data, str) and data == _ITER_END:
                active[w] = False
                send()
                continue
            send()
            yield _from_wire(data)
    finally:
        for q in index_queues:
            q.put(None)
        for p in workers:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        for q in index_queues + [results]:
            q.cancel_join_thread()
            q.close()


class IdxLoader:
    """Batches of an IDX dataset (MNIST, Fashion-MNIST: images scaled to [0, 1], optionally
    normalized) from the C core's loader: shuffled by (seed, epoch), prepared by background
    workers, the same batches `oar train` trains on. Each iteration is the next epoch.

        loader = IdxLoader("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", batch_size=64,
                           shuffle=True, drop_last=True, seed=0, mean=0.2860, std=0.3530)
        for x, y in loader: ...                 # x [B, 1, 28, 28] float32, y [B] int64
    """

    def __init__(self, images, labels, batch_size=1, shuffle=False, drop_last=False, seed=0, num_workers=0,
                 mean=None, std=None):
        if (mean is None) != (std is None):
            raise ValueError("IdxLoader: give both mean and std, or neither")
        self._c = _C.IdxLoader(str(images), str(labels), int(batch_size), bool(shuffle), bool(drop_last), int(seed),
                               int(num_workers), mean, std)
        self.batch_size, self.epoch = batch_size, 0

    def __len__(self):
        return self._c.num_batches()

    def __iter__(self):
        self._c.start_epoch(self.epoch)
        self.epoch += 1
        while True:
            b = self._c.next()
            if b is None:
                return
            yield b


class TextLoader(IdxLoader):
    """Batches of byte windows of a text file from the C core's loader, as `oar train` trains its
    language models on a text file: the part [begin, end) of the file (fractions of its size),
    windows of `window` tokens (x) and the same window shifted by one (y), at offsets drawn from
    (seed, epoch) when random_windows, else consecutive. Each iteration is the next epoch.

        loader = TextLoader("austen.txt", window=128, batch_size=8, shuffle=True, drop_last=True,
                            random_windows=True, end=0.9)
        for x, y in loader: ...                 # x, y [B, window] int64 byte values
    """

    def __init__(self, path, window, batch_size=1, shuffle=False, drop_last=False, seed=0, num_workers=0,
                 random_windows=False, begin=0.0, end=1.0):
        self._c = _C.IdxLoader(str(path), None, int(batch_size), bool(shuffle), bool(drop_last), int(seed),
                               int(num_workers), None, None, int(window), bool(random_windows), float(begin),
                               float(end))
        self.batch_size, self.epoch = batch_size, 0
