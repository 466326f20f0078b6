"""oar.utils.data.distributed.DistributedSampler (torch's): each rank's share of a dataset, so that
the ranks together see every sample once per epoch. The permutation comes from seed + epoch only
(Python's Mersenne Twister, not oar's generator, which the training draws from), so every rank
computes the same one; set_epoch(e) before each epoch reshuffles. Rank r takes indices r, r+N,
r+2N, ... of it: N ranks at batch B see, step by step, the samples of one process at batch N*B."""
import math
import random
import sys

from . import data as _data


class DistributedSampler(_data.Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from .. import distributed as dist

            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: expected num_replicas and rank, or an initialized process "
                                   "group (oar.distributed.init_process_group) to read them from")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not (isinstance(num_replicas, int) and num_replicas >= 1):
            raise ValueError(f"DistributedSampler: expected num_replicas >= 1, got {num_replicas!r}")
        if not (isinstance(rank, int) and 0 <= rank < num_replicas):
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        indices = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(indices)
        if self.drop_last:
            indices = indices[:self.total_size]
        elif self.total_size > len(indices):   # pad with the first samples again, as torch does
            pad = self.total_size - len(indices)
            indices += (indices * math.ceil(pad / len(indices)))[:pad]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


_data.distributed = sys.modules[__name__]
sys.modules[_data.__name__ + ".distributed"] = sys.modules[__name__]   # import oar.utils.data.distributed
