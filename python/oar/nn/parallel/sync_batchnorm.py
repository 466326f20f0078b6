"""SyncBatchNorm (torch.nn.SyncBatchNorm): batch norm whose training statistics cover the global
batch of every rank, as src/dist/sync_batch_norm.c computes them: the per-channel sums and then the
sums of squared deviations go through the differentiable allreduce_sum op (its gradient is the
allreduce of the output gradients, so each rank's backward gets the other ranks' share), so N ranks
at batch B normalize and learn as one process at batch N*B with BatchNorm. Outside a multi-rank
world, or in evaluation, it is BatchNorm. Compiled (oar.jit.to_static), the sums and the running
statistics' updates are program nodes; the global count is read at tracing (one program per batch
shape), and momentum=None (a cumulative average, whose factor is read eagerly) stays eager."""
from ..._ops import default as _d  # defaults from the op table
from ..modules.layers import _BatchNorm


class SyncBatchNorm(_BatchNorm):
    _expect = tuple(range(2, 9))

    def __init__(self, num_features, eps=_d("batch_norm", "eps"), momentum=_d("batch_norm", "momentum"), affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        if process_group is not None:
            from ... import distributed as dist

            if process_group is dist.GroupMember.NON_GROUP_MEMBER:
                raise ValueError("SyncBatchNorm: this rank is not a member of process_group (new_group gave it "
                                 "NON_GROUP_MEMBER); build the layer with a group this rank belongs to")
            dist._check_group(process_group, "SyncBatchNorm")
        self.process_group = process_group

    def forward(self, input):
        from ... import distributed as dist

        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: expected input of shape [N, {self.num_features}, ...] "
                             f"(num_features), got {tuple(input.shape)}")
        use_batch = self.training or self.running_mean is None
        if not use_batch or not dist.is_initialized() or dist.get_world_size(self.process_group) == 1:
            return super().forward(input)
        return self._sync_forward(input)

    def _group_id(self):
        """The allreduce_sum op's group attribute: 0 for the world, else the process group's id."""
        from ... import distributed as dist

        h = dist._resolve(self.process_group, "SyncBatchNorm")
        return 0 if h is None else h.id()

    def _sync_forward(self, x):
        from ... import full, no_grad, ops

        gid = self._group_id()
        dims = [d for d in range(x.dim()) if d != 1]
        per_channel = [1, self.num_features] + [1] * (x.dim() - 2)
        # the global count as an op too (ranks' batches may differ: a last batch), so a compiled step
        # reads no value while tracing
        n = ops.allreduce_sum(full([1] * x.dim(), float(x.numel() // self.num_features)), channel=0, group=gid)
        mean = ops.allreduce_sum(x.sum(dims, keepdim=True), channel=0, group=gid) / n
        dev = x - mean
        var = ops.allreduce_sum((dev * dev).sum(dims, keepdim=True), channel=0, group=gid) / n
        y = dev * (var + self.eps).rsqrt()
        if self.affine:
            y = y * self.weight.reshape(per_channel) + self.bias.reshape(per_channel)
        if self.training and self.track_running_stats:
            # ops that write in place (ema_update, increment), so a compiled step updates at every run
            with no_grad():
                ops.increment(self.num_batches_tracked)
                f = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
                ops.ema_update(self.running_mean, mean, momentum=f, scale=1.0)
                unbiased = var * (n / (n - 1).clamp(min=1.0))   # n/(n-1); 1 for a single value
                ops.ema_update(self.running_var, unbiased, momentum=f, scale=1.0)
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d replaced by a SyncBatchNorm holding the same parameters and
        buffers (the same tensors)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
