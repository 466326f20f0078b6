"""ZeroRedundancyOptimizer's step inside DistributedDataParallel's communication hook (torch 1.13's
hook_with_zero_step): ZeRO(..., overlap_with_ddp=True) shards the parameters by DDP bucket, and the
wrapped hook, after the last bucket's communication, steps this rank's shard and broadcasts every
bucket's parameters from its owner, so the training loop has no step() (docs/dist.md).

In oar the step runs as the last bucket's Future completes, where DDP collects the hooks' Futures at
the end of backward (every gradient is averaged and in .grad by then); the parameter broadcasts are
issued together and waited for before backward returns. Unlike torch 1.13, any backend runs it (oar's
collectives are ordered per rank and checked across ranks, so gloo's hang does not arise) and the
first iterations already step (oar's buckets never change after DDP is made)."""
import weakref

__all__ = ["hook_with_zero_step"]


def hook_with_zero_step(hook, ddp, zero, shard_buckets=False):
    """hook with zero's step after the last bucket: register the result with ddp.register_comm_hook.
    shard_buckets: each bucket's parameters split across ranks to even the shards (torch's rule);
    otherwise bucket i goes whole to rank i mod N. ValueError unless zero has overlap_with_ddp=True."""
    if not getattr(zero, "_overlap_with_ddp", False):
        raise ValueError("ZeroRedundancyOptimizer must be constructed with `overlap_with_ddp=True` to use this "
                         "hook properly")
    ddp._make_bucket_views()   # the shards follow the buckets
    zero._init_zero_for_overlap(ddp, bool(shard_buckets))
    ddp_ref = weakref.ref(ddp)

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

