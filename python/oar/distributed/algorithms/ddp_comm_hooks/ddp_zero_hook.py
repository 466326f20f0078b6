"""ZeroRedundancyOptimizer's step inside DistributedDataParallel's communication hook (torch 1.13's
hook_with_zero_step and hook_with_zero_step_interleaved): ZeRO(..., overlap_with_ddp=True) shards the
parameters by DDP bucket, and the wrapped hook, after the last bucket's communication, steps this rank's
shard and broadcasts every bucket's parameters from its owner, so the training loop has no step()
(docs/dist.md). The interleaved form steps bucket by bucket instead: as each bucket's average arrives,
the rank's parameters in it are updated and the bucket's broadcasts start, so they travel while the
next buckets are stepped.

In oar hook_with_zero_step's step runs as the last bucket's Future completes, where DDP collects the hooks' Futures at
the end of backward (every gradient is averaged and in .grad by then); the parameter broadcasts are
issued together and waited for before backward returns. Unlike torch 1.13, any backend runs it (oar's
collectives are ordered per rank and checked across ranks, so gloo's hang does not arise) and the
first iterations already step (oar's buckets never change after DDP is made)."""
import weakref

__all__ = ["hook_with_zero_step", "hook_with_zero_step_interleaved"]


def _setup(ddp, zero, shard_buckets):
    """The checks both hooks share and zero's shards from ddp's buckets: a weak reference to ddp."""
    if not getattr(zero, "_overlap_with_ddp", False):
        raise ValueError("ZeroRedundancyOptimizer must be constructed with `overlap_with_ddp=True` to use this "
                         "hook properly")
    ddp._make_bucket_views()   # the shards follow the buckets
    zero._init_zero_for_overlap(ddp, bool(shard_buckets))
    return weakref.ref(ddp)


def hook_with_zero_step(hook, ddp, zero, shard_buckets=False):
    """hook with zero's step after the last bucket: register the result with ddp.register_comm_hook.
    shard_buckets: each bucket's parameters split across ranks to even the shards (torch's rule);
    otherwise bucket i goes whole to rank i mod N. ValueError unless zero has overlap_with_ddp=True."""
    ddp_ref = _setup(ddp, zero, shard_buckets)

    def hook_with_zero_fn(state, bucket):
        fut = hook(state, bucket)
        if not bucket.is_last():
            return fut
        index = bucket.index()

        def step(f):
            model = ddp_ref()
            model._absorb_bucket(index, f.value())   # the earlier buckets were absorbed in order already
            zero._overlap_step()
            return model._hook_buckets[index][0]

        return fut.then(step)

    return hook_with_zero_fn


def hook_with_zero_step_interleaved(hook, ddp, zero, shard_buckets=False):
    """hook with zero's step interleaved bucket by bucket: register the result with ddp.register_comm_hook.
    Each bucket's Future is chained to the update of this rank's parameters in that bucket and the start
    of the bucket's parameter broadcasts from their owners; the last bucket's waits for every broadcast.
    The parameters equal hook_with_zero_step's and plain ZeRO's bit for bit (each parameter's update is
    the same op). In oar the Futures complete where DDP waits for them after backward, in bucket order,
    so what interleaves is a bucket's update with the broadcasts of the buckets before it, not with
    backward. shard_buckets as in hook_with_zero_step; ValueError unless zero has overlap_with_ddp=True."""
    ddp_ref = _setup(ddp, zero, shard_buckets)

    def hook_with_zero_interleaved_fn(state, bucket):
        fut = hook(state, bucket)
        index, is_last = bucket.index(), bucket.is_last()

        def zero_step(f):
            model = ddp_ref()
            model._absorb_bucket(index, f.value())   # this bucket's average into .grad first
            zero._overlap_bucket_step(index, is_last)
            return model._hook_buckets[index][0]

        return fut.then(zero_step)

    return hook_with_zero_interleaved_fn
