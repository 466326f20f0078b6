"""DistributedDataParallel: torch's wrapper over oar_dist_data_parallel (docs/dist.md).

The C core does the work: rank 0's parameters and buffers are broadcast at construction; each
parameter's gradient hook copies its gradient into a bucket (last parameters first) and a full
bucket's allreduce starts while backward continues; the average lands in .grad as a view of the
bucket. What Python adds is the end of backward: torch's reducer finalizes from an autograd
callback; here Tensor.backward syncs the wrappers whose forward ran since the last backward
(the buckets not yet sent go with zeros for the parameters this rank did not use, so unused
parameters never hang, with or without find_unused_parameters)."""
import contextlib
import warnings
import weakref

from ... import _C
from ... import distributed as _dist
from ...distributed import _require_init
from ...distributed.algorithms.join import Join, Joinable, JoinHook, _JoinConfig
from ..modules.module import Module

_pending = []            # weak references to wrappers whose forward ran since the last backward
_base_backward = None    # Tensor.backward before the first wrapper installed the sync after it


def _sync_pending():
    waiting = [r() for r in _pending]
    del _pending[:]
    for ddp in waiting:
        if ddp is not None:
            ddp._settle_join()
            try:
                ddp._dp.sync()
            except BaseException:
                ddp._hook_futures = []   # dropped: their collectives are waited for as they are freed
                raise
            if ddp._comm_hook is not None:
                ddp._finish_comm_hooks()
            if ddp.static_graph and ddp._syncing:
                ddp._check_static_graph()


def _backward_then_sync(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    if inputs is not None:
        raise NotImplementedError("Tensor.backward(inputs=...) is not offered with DistributedDataParallel: every "
                                  "parameter's gradient is averaged across ranks")
    try:
        _base_backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)
    except BaseException:
        del _pending[:]   # the C side resets its step at the next sync
        raise
    _sync_pending()


def _install_sync():
    global _base_backward
    from ..._tensor import Tensor

    if _base_backward is None:
        _base_backward = Tensor.backward
        Tensor.backward = _backward_then_sync


class DistributedDataParallel(Module, Joinable):
    """Data parallel training of module across the ranks of oar.distributed's world.

    bucket_cap_mb: bucket capacity (torch's default 25); the first bucket holds 1 MB so
    communication starts early. find_unused_parameters is accepted either way: a parameter no
    rank used keeps no gradient, one some ranks used gets their average, and nothing hangs.
    gradient_as_bucket_view: always (the averaged .grad is a view of its bucket).
    broadcast_buffers: rank 0's buffers (BatchNorm statistics) overwrite the others' before
    every training forward, as in torch. Reductions run in a fixed rank order: a run repeats bit
    for bit. device_ids/output_device: CPU tensors only (None). static_graph=True: the promise that
    the parameters some rank uses stay the same every step; oar's DDP needs no graph walk either way
    (everything torch's flag enables works without it), so what the flag adds is the check of that
    promise: a synced backward whose set of parameters holding a gradient differs from the first one's
    raises torch's RuntimeError, naming them."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, process_group=None,
                 bucket_cap_mb=25, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, first_bucket_mb=1.0, mpi_allreduce=False):
        super().__init__()
        _require_init("DistributedDataParallel")
        if process_group is _dist.GroupMember.NON_GROUP_MEMBER:
            raise ValueError("DistributedDataParallel: this rank is not a member of process_group (new_group gave it "
                             "NON_GROUP_MEMBER); wrap the module only on the group's ranks")
        group_handle = _dist._resolve(process_group, "DistributedDataParallel")
        self.process_group = process_group if process_group is not None else _dist.GroupMember.WORLD
        if device_ids not in (None, [], ["cpu"]) or output_device not in (None, "cpu"):
            raise ValueError(f"DistributedDataParallel: expected device_ids=None and output_device=None (module on the "
                             f"CPU), got {device_ids!r} and {output_device!r}")
        if not bucket_cap_mb > 0 or not first_bucket_mb > 0:
            raise ValueError(f"DistributedDataParallel: expected bucket_cap_mb > 0 and first_bucket_mb > 0, got "
                             f"{bucket_cap_mb!r} and {first_bucket_mb!r}")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_cap_mb = bucket_cap_mb
        self.dim = dim
        self.device_ids, self.output_device = None, None
        from ... import float32, float64, int32, int64

        # buffers of the communicator's dtypes (bool and u8 ones are flags, not learned state)
        buffers = [(n, b) for n, b in module.named_buffers()
                   if b is not None and b.dtype in (float32, float64, int32, int64)]
        self._buffers_to_broadcast = [b for _, b in buffers]
        self._dp = _C.DataParallel(list(module.named_parameters()), buffers, float(bucket_cap_mb),
                                   float(first_bucket_mb), bool(mpi_allreduce), group_handle)
        self._group_handle = group_handle
        self._world = _dist.get_world_size(self.process_group)
        self._join_config = _JoinConfig.construct_disabled_join_config()   # set by a Join context
        self._divide_by_initial_world_size = True   # set by the join hook's options
        self._join_work = None     # the join context's count of the ranks still training, in flight
        self._syncing = True       # False inside no_sync()
        self._pre_forward_done = False  # a compiled step ran _pre_forward for the call being traced
        self._named_params = list(module.named_parameters())   # what _C.DataParallel's layout() indexes
        self._comm_hook = self._comm_state = None
        self._hook_buckets = []    # per bucket: (buffer, gradient views, parameters), with a hook
        self._hook_futures = []    # this step's (bucket index, Future), in bucket order
        self._hook_wait_seconds = 0.0
        self.static_graph = False
        self._static_used = None   # static_graph: the parameters holding a gradient after the first sync
        if static_graph:
            self._set_static_graph()
        _install_sync()

    def _set_static_graph(self):
        """static_graph=True after construction (torch's private method, with its warnings)."""
        if self.static_graph:
            warnings.warn("You've set static_graph to be True, no need to set it again.")
            return
        self.static_graph = True
        if self.find_unused_parameters:
            warnings.warn("You passed find_unused_parameters=true to DistributedDataParallel, `_set_static_graph` "
                          "will detect unused parameters automatically, so you do not need to set "
                          "find_unused_parameters=true, just be sure these unused parameters will not change during "
                          "training loop while calling `_set_static_graph`.")

    def _check_static_graph(self):
        """static_graph's promise, after a synced backward: the same parameters hold a gradient as after
        the first one (those some rank used, gradients being dropped between steps by zero_grad)."""
        used = frozenset(i for i, (_, p) in enumerate(self._named_params) if p.grad is not None)
        if self._static_used is None:
            self._static_used = used
            return
        if used != self._static_used:
            names = lambda ix: [self._named_params[i][0] for i in sorted(ix)]  # noqa: E731
            raise RuntimeError(f"DistributedDataParallel: your training graph has changed in this iteration: "
                               f"parameters used in the first iteration and unused now: "
                               f"{names(self._static_used - used)}, unused then and used now: "
                               f"{names(used - self._static_used)}; this is not compatible with static_graph set to "
                               f"True (make the model use the same parameters every step, or pass "
                               f"static_graph=False)")

    def _pre_forward(self):
        """What torch's DDP does before each forward, eagerly: inside join(), the join's collectives
        (count the ranks still training, [early termination], [buffers from the largest of them],
        whether backward syncs; the joined ranks shadow them), else rank 0's buffers to all. A compiled
        step (oar.jit.to_static) runs it before every call, since the forward's Python runs only when
        the step is traced."""
        from ... import is_grad_enabled

        join = self._join_config
        if join.enable and is_grad_enabled():
            self._settle_join()   # a forward without backward left it
            # the count (when this is the context's first joinable) stays in flight until the sync,
            # unless the divisor needs it now (divide_by_initial_world_size=False)
            work = Join.notify_join_context(self)
            count = -1
            if work is not None and not self._divide_by_initial_world_size:
                count = work.count()
            elif work is not None:
                self._join_work = work
            self._dp.join_notify(self._divide_by_initial_world_size, join.throw_on_early_termination,
                                 self.training and self.broadcast_buffers and bool(self._buffers_to_broadcast),
                                 self._syncing, count)
        elif self.training and self.broadcast_buffers and self._world > 1 and self._buffers_to_broadcast:
            works = [_C.dist_broadcast(b, 0, self._group_handle) for b in self._buffers_to_broadcast]
            for w in works:
                w.wait()

    def forward(self, *inputs, **kwargs):
        from ... import is_grad_enabled

        if self._pre_forward_done:
            pass   # the compiled step calling it ran it for this call
        elif not _C.is_tracing():
            self._pre_forward()
        else:
            raise RuntimeError("DistributedDataParallel: a compiled step (oar.jit.to_static) calls this module, but "
                               "the step does not reach it through its closure, globals, bound self or modules=, so "
                               "its buffer broadcast and join collectives could not run before each call; pass "
                               "modules=(ddp,) to to_static")
        out = self.module(*inputs, **kwargs)
        if is_grad_enabled() and not any(r() is self for r in _pending):
            _pending.append(weakref.ref(self))
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Gradient accumulation: backward calls inside keep each rank's own gradients in .grad and
        send nothing; the first backward after the block adds its gradients and averages the sums."""
        self._dp.no_sync(True)
        self._syncing = False
        try:
            yield
        finally:
            self._dp.no_sync(False)
            self._syncing = True

    # -- communication hooks (torch's register_comm_hook) ---------------------------------------

    def register_comm_hook(self, state, hook):
        """hook(state, bucket) -> Future: DDP hands each gradient bucket to hook instead of averaging it
        (torch's register_comm_hook). bucket is a dist.GradBucket; the Future's value, a tensor of the
        bucket's size, becomes the bucket's gradients (not divided by the world size for the hook: an
        average is the hook's to take, as allreduce_hook does). Hooks run in bucket order on every rank:
        during backward as soon as a bucket and the ones before it are full (so their communication
        overlaps the rest of backward), at the end of backward for buckets holding parameters this rank
        did not use (their gradients are zeros). The Futures are waited for, in bucket order, when
        backward ends: their then() callbacks run there (see oar.futures). Once per model (torch's
        RuntimeError otherwise), between steps; eager steps only, and not with join()."""
        self._check_comm_hook(hook)
        ref = weakref.ref(self)

        def run(index):   # weak: the C handle holds this function, and the handle is the wrapper's
            ddp = ref()
            if ddp is not None:
                ddp._run_comm_hook(index)

        self._dp.set_comm_hook(run)
        self._comm_hook, self._comm_state = hook, state
        self._make_bucket_views()

    def _register_builtin_comm_hook(self, comm_hook_type):
        """torch's built-in hooks by dist.BuiltinCommHookType: ALLREDUCE is allreduce_hook, FP16_COMPRESS
        fp16_compress_hook (torch runs C++ copies of them; oar's hooks are one mechanism either way).
        Once per model, as register_comm_hook."""
        from ...distributed.algorithms.ddp_comm_hooks import default_hooks

        hooks = {_dist.BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
                 _dist.BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook}
        if comm_hook_type not in hooks:
            raise ValueError(f"_register_builtin_comm_hook: expected dist.BuiltinCommHookType.ALLREDUCE or "
                             f"FP16_COMPRESS, got {comm_hook_type!r}")
        self.register_comm_hook(None, hooks[comm_hook_type])

    def _make_bucket_views(self):
        """Per bucket: its flat gradient tensor, the parameters' views of it and the parameters."""
        if self._hook_buckets:
            return
        params = [p for _, p in self._named_params]
        for k, members in enumerate(self._dp.layout()):
            buffer = self._dp.bucket_buffer(k)
            grads, off = [], 0
            for i in members:
                grads.append(buffer[off:off + params[i].numel()].view(tuple(params[i].shape)))
                off += params[i].numel()
            self._hook_buckets.append((buffer, grads, [params[i] for i in members]))

    def _check_comm_hook(self, hook):
        import inspect

        from ... import Tensor
        from ...futures import Future

        if not callable(hook):
            raise TypeError("Communication hook must be callable.")
        sig = inspect.signature(hook)
        if "bucket" in sig.parameters and sig.parameters["bucket"].annotation not in (inspect._empty,
                                                                                       _dist.GradBucket):
            raise ValueError("Communication hook: bucket annotation should be dist.GradBucket.")
        if sig.return_annotation not in (inspect._empty, Future[Tensor]):
            raise ValueError("Communication hook: return annotation should be torch.futures.Future[torch.Tensor].")

    def _run_comm_hook(self, index):
        from ...futures import Future

        buffer, grads, params = self._hook_buckets[index]
        bucket = _dist.GradBucket(index, buffer, grads, params, index == len(self._hook_buckets) - 1)
        fut = self._comm_hook(self._comm_state, bucket)
        if not isinstance(fut, Future):
            raise RuntimeError(f"DDP communication hook's callback must return a torch.futures.Future object, but "
                               f"got {type(fut).__module__}.{type(fut).__name__} (bucket {index}); return a "
                               f"Future whose value is the bucket's new gradients")
        self._hook_futures.append((index, fut))

    def _absorb_bucket(self, index, value):
        """value (a hook's result) becomes bucket index's gradients (copied unless it is the bucket)."""
        from ... import no_grad

        buffer = self._hook_buckets[index][0]
        if not isinstance(value, _C.TensorBase):
            raise RuntimeError(f"DistributedDataParallel: the communication hook's Future for bucket {index} holds "
                               f"{type(value).__name__}; expected a Tensor of the bucket's {buffer.numel()} "
                               f"elements (bucket.buffer()'s shape)")
        if value.numel() != buffer.numel():
            raise RuntimeError(f"DistributedDataParallel: the communication hook's Future for bucket {index} holds "
                               f"a tensor of {value.numel()} elements; expected the bucket's {buffer.numel()}")
        if value.data_ptr() != buffer.data_ptr() or value.dtype != buffer.dtype:
            with no_grad():   # a cast first: the cast op's vector loop, where copy_ casts element by element
                buffer.copy_(value.reshape(-1).to(buffer.dtype))

    def _finish_comm_hooks(self):
        """Waits for this step's hook Futures in bucket order and writes their values into the buckets
        (every one is waited for, even after a failure, whose error is then raised)."""
        import time

        futures, self._hook_futures = self._hook_futures, []
        t0 = time.perf_counter()
        err = None
        for index, fut in futures:
            try:
                value = fut.wait()
                if err is None:
                    self._absorb_bucket(index, value)
            except Exception as e:  # noqa: BLE001 (the first error is raised once all are waited for)
                err = err or e
        self._hook_wait_seconds += time.perf_counter() - t0
        if err is not None:
            raise err

    def bucket_stats(self):
        """The buckets (elements, parameters) in launch order and the overlap counters: syncs, bucket
        allreduces started from gradient hooks (during backward) and at the sync, communication time,
        and the time the syncs waited for it (not hidden behind backward). With a communication hook, the
        counts are of hook calls, and hook_wait_seconds is the time spent waiting for the hooks' Futures
        (and running their callbacks) after backward."""
        stats = self._dp.stats()
        stats["hook_wait_seconds"] = self._hook_wait_seconds
        return stats

    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """Uneven inputs (torch 1.13's DDP.join): Join([self], ...), a context manager around the training
        loop. A rank that runs out of batches leaves the loop and, at the end of the block, shadows the
        others' collectives (their buffer broadcasts and every gradient bucket, contributing zeros) until
        all have joined; then the model of the last rank to join goes to every rank. With other joinables,
        use oar.distributed.algorithms.Join([ddp, ...], divide_by_initial_world_size=...) directly.

        divide_by_initial_world_size: gradients are the sum over the ranks still training divided by the
        group's size (True, torch's default: each sample weighs as in the even part), or by the number of
        ranks still training (False). throw_on_early_termination: once a rank runs out, every rank raises
        RuntimeError (the joined one "exhausted all inputs", the others "detected at least one rank").
        Inside the block only the joinables' own collectives may run while a rank has joined: another
        collective meets the join's and fails on both ranks as a mismatched collective."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        """The joined rank's side of one training step (Join's protocol): kwargs may hold
        divide_by_initial_world_size (default True)."""
        return _DDPJoinHook(self, bool(kwargs.get("divide_by_initial_world_size", True)))

    @property
    def join_device(self):
        from ... import device

        return device("cpu")

    @property
    def join_process_group(self):
        return self.process_group

    def _settle_join(self):
        work, self._join_work = self._join_work, None
        if work is not None:
            work.wait()

    def _get_name(self):
        return "DistributedDataParallel"


class _DDPJoinHook(JoinHook):
    """A joined rank's shadow of DistributedDataParallel's collectives: each round (main_hook) the
    buffer broadcast, the backward-sync flag and, when the training ranks sync, every gradient bucket
    with zeros; at the end (post_hook) the last joiner's parameters and buffers to every rank."""

    def __init__(self, ddp, divide_by_initial_world_size):
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size
        self._join_count = 0   # the ranks still training, set by Join before each main_hook

    def main_hook(self):
        ddp = self.ddp
        cfg = ddp._join_config
        ddp._dp.join_shadow(ddp._divide_by_initial_world_size, cfg.throw_on_early_termination,
                            ddp.training and ddp.broadcast_buffers and bool(ddp._buffers_to_broadcast),
                            self._join_count)

    def post_hook(self, is_last_joiner):
        self.ddp._settle_join()
        self.ddp._dp.join_end(bool(is_last_joiner))
