"""ZeroRedundancyOptimizer: torch 1.13's optimizer-state sharding (ZeRO stage 1) over oar's
communicator (docs/dist.md, "ZeroRedundancyOptimizer").

Every rank holds the whole model but only the optimizer state of its shard: the parameters are
partitioned across the group's ranks, group by group, greedily by size (largest first, each to the
rank with the fewest elements so far), as torch does, so a rank keeps about 1/N of the state. A step
updates this rank's shard with a local optimizer of `optimizer_class`, then every rank broadcasts
its updated parameters to the others (one broadcast per parameter, or one per rank with
parameters_as_bucket_view=True). The broadcasts are oar's collectives on the process group; the
update of each parameter is the local optimizer's, so with DDP the parameters equal those of DDP
with the plain optimizer bit for bit.

It is a Joinable: under Join([ddp, zero]) a rank that ran out of inputs still takes part in the
others' steps (its hook runs step(), so its shard is updated with the gradients it holds and
broadcast)."""
import copy
import warnings
from itertools import chain

from ... import _C
from ...optim.optimizer import Optimizer
from .. import GroupMember, broadcast, broadcast_object_list, get_global_rank, get_rank, get_world_size
from ..algorithms.join import Join, Joinable, JoinHook

__all__ = ["ZeroRedundancyOptimizer"]


class _OverlapInfo:
    """overlap_with_ddp's state: the DDP model the hook serves, and per rank its (bucket, params) shares."""

    def __init__(self):
        self.ddp = None
        self.assignments = []
        self.broadcasts = None   # hook_with_zero_step_interleaved: this step's broadcasts in flight
        self.steps_before = 0    # ... and the local optimizer's step count before the step


class _ZeROJoinHook(JoinHook):
    """A joined rank's share of each step of the ranks still training: its optimizer step and the
    parameter broadcasts (with the gradients it holds, as torch's hook)."""

    def __init__(self, zero):
        self.zero = zero

    def main_hook(self):
        self.zero.step()


def _flat_state(sd):
    """An oar optimizer's state_dict()['state'] ('<index>.<slot>' -> tensor) as picklable arrays."""
    return {k: v.numpy().copy() for k, v in sd["state"].items()}


class ZeroRedundancyOptimizer(Optimizer, Joinable):
    """ZeroRedundancyOptimizer(params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
    overlap_with_ddp=False, **defaults): wraps `optimizer_class(shard_param_groups, **defaults)` on each
    rank's shard of params (tensors or param groups) and broadcasts the updated shards after each step.

    parameters_as_bucket_view: the parameters each rank owns become views of one flat buffer per rank,
    so a step broadcasts N buffers instead of one tensor per parameter (the parameters' identity, and so
    every holder of them, is kept).

    overlap_with_ddp=True: the step runs inside DDP's communication hook made by
    ddp_comm_hooks.ddp_zero_hook.hook_with_zero_step (register it on the DDP model); step() is then a
    no-op with a warning, as in torch. The shards follow DDP's buckets (bucket i to rank i mod N, or
    split across ranks with shard_buckets=True); one parameter group; the local optimizer is made when
    the hook is (oar's buckets are final from DDP's construction, so unlike torch's, whose buckets are
    rebuilt after the first backward, the first iterations update the parameters too)."""

    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        if process_group is GroupMember.NON_GROUP_MEMBER:
            raise ValueError("ZeroRedundancyOptimizer: this rank is not a member of process_group (new_group gave "
                             "it NON_GROUP_MEMBER); make the optimizer only on the group's ranks")
        params = self._verify_and_init_params(params)
        self._verify_same_dense_param_type()
        self.initialized = False
        self._partition_cache = []
        self._param_to_rank_cache = {}
        self._index_cache = []
        self.process_group = process_group if process_group is not None else GroupMember.WORLD
        self.world_size = get_world_size(self.process_group)
        self.rank = get_rank(self.process_group)
        self.global_rank = get_global_rank(self.process_group, self.rank)
        Optimizer.__init__(self, params, defaults)
        Joinable.__init__(self)
        self._is_trainable_mask = self._get_is_trainable_mask()
        self._default_device = self._all_params[0].device
        self._optim_defaults = defaults
        if not isinstance(optimizer_class, type) or not issubclass(optimizer_class, Optimizer):
            raise TypeError(f"ZeroRedundancyOptimizer: expected optimizer_class to be an oar.optim.Optimizer class "
                            f"(torch.optim.* under oar's torch switch), got {optimizer_class!r}")
        self._optim_constructor = optimizer_class
        self._overlap_with_ddp = bool(overlap_with_ddp)
        if self._overlap_with_ddp:
            if len(self.param_groups) != 1:
                raise ValueError(f"ZeroRedundancyOptimizer with `overlap_with_ddp=True` only supports a single "
                                 f"parameter group, got {len(self.param_groups)}")
            if parameters_as_bucket_view:
                warnings.warn("`parameters_as_bucket_view=True` will be ignored since `overlap_with_ddp=True`; "
                              "instead, a different bucketing strategy will be used")
                parameters_as_bucket_view = False
            self._overlap_info = _OverlapInfo()   # the shards and the local optimizer come with the hook
        else:
            self.optim = optimizer_class(self._partition_parameters()[self.rank], **defaults)
            self._sync_param_groups(self.optim.param_groups, self.param_groups)
        self.parameters_as_bucket_view = bool(parameters_as_bucket_view)
        self._buckets = []
        self._build_param_buckets()
        self._all_state_dicts = []
        self.initialized = True

    # -- parameters and their partition -------------------------------------------------------

    def _verify_and_init_params(self, params):
        if isinstance(params, _C.TensorBase):
            raise TypeError(f"`params` argument should be an iterable of Tensors, but got {type(params).__name__}")
        try:
            all_params = list(params)
        except TypeError:
            raise TypeError(f"`params` argument should be an iterable of Tensors or dicts, but got "
                            f"{type(params).__name__}") from None
        if not all_params:
            raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
        tensors = all(isinstance(p, _C.TensorBase) for p in all_params)
        dicts = all(isinstance(p, dict) for p in all_params)
        if not tensors and not dicts:
            raise TypeError("`params` argument should be an iterable of Tensors or dicts")
        if tensors:
            self._all_params = list(all_params)
        else:
            self._all_params = []
            for g in all_params:
                if "params" not in g:
                    raise ValueError("Each parameter group passed-in via `params` must have a 'params' key mapping "
                                     "to the parameters in the group")
                ps = g["params"]
                self._all_params.extend([ps] if isinstance(ps, _C.TensorBase) else list(ps))
        return all_params

    def _verify_same_dense_param_type(self):
        first = self._all_params[0]
        for p in self._all_params[1:]:
            if p.dtype != first.dtype or p.device != first.device:
                raise ValueError(f"ZeroRedundancyOptimizer only supports using the same dense type for all "
                                 f"parameters but got both {first.dtype} on {first.device} and {p.dtype} on "
                                 f"{p.device}")

    def _get_is_trainable_mask(self):
        return [bool(p.requires_grad) for p in self._all_params]

    def _clear_cache(self):
        self._partition_cache = []
        self._param_to_rank_cache = {}
        self._index_cache = []

    def _partition_parameters(self):
        """For each rank, its param groups (copies of this optimizer's groups holding that rank's params):
        within each group the params sorted by size, largest first, each to the rank with the fewest
        elements so far over all groups (the first such rank on ties), as torch's sorted greedy."""
        if not self._partition_cache:
            n = self.world_size
            self._partition_cache = [[] for _ in range(n)]
            sizes = [0] * n
            for group in self.param_groups:
                per_rank = [[] for _ in range(n)]
                for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                    r = sizes.index(min(sizes))
                    per_rank[r].append(p)
                    sizes[r] += p.numel()
                for r, ps in enumerate(per_rank):
                    g = copy.copy(group)
                    g["params"] = ps
                    self._partition_cache[r].append(g)
        return self._partition_cache

    @property
    def _param_to_rank(self):
        """id(param) -> the group rank that updates it."""
        if not self._param_to_rank_cache:
            for r, groups in enumerate(self._partition_parameters()):
                for g in groups:
                    for p in g["params"]:
                        self._param_to_rank_cache[id(p)] = r
        return self._param_to_rank_cache

    @property
    def _index_to_param(self):
        """The params in the order of the global state's indices (param groups in order)."""
        if not self._index_cache:
            self._index_cache = list(chain(*(g["params"] for g in self.param_groups)))
        return self._index_cache

    def _local_params(self, rank):
        return list(chain(*(g["params"] for g in self._partition_parameters()[rank])))

    def add_param_group(self, param_group):
        """Adds a param group on every rank (call it on all ranks with the same group): its params are
        partitioned after the existing ones, so the shards already made stay where they are."""
        if self.initialized and self._overlap_with_ddp:
            raise RuntimeError("ZeroRedundancyOptimizer with `overlap_with_ddp=True` only supports a single "
                               "parameter group")
        g = self._checked_group(param_group)
        self.param_groups.append(g)
        if not self.initialized:
            return
        self._all_params.extend(g["params"])
        self._is_trainable_mask = self._get_is_trainable_mask()
        self._clear_cache()
        groups = self._partition_parameters()[self.rank]
        if len(groups) == len(self.optim.param_groups) + 1:
            self.optim.add_param_group(groups[-1])
        if self.parameters_as_bucket_view:
            self._build_param_buckets()

    # -- buckets ------------------------------------------------------------------------------

    def _build_param_buckets(self):
        """parameters_as_bucket_view: rank r's trainable params become consecutive views of bucket r (one
        flat tensor; its values are theirs), frozen ones get storage of their own again."""
        if not self.parameters_as_bucket_view:
            return
        from ... import empty, no_grad, zeros

        self._buckets = []
        with no_grad():
            for params in (self._local_params(r) for r in range(self.world_size)):
                trainable = [p for p in params if p.requires_grad]
                for p in params:
                    if not p.requires_grad:
                        p._set_storage_(p.detach().clone())
                size = sum(p.numel() for p in trainable)
                if size == 0:
                    self._buckets.append(zeros(1, dtype=params[0].dtype if params else self._all_params[0].dtype))
                    continue
                bucket = empty(size, dtype=trainable[0].dtype)
                off = 0
                for p in trainable:
                    view = bucket[off:off + p.numel()]
                    view.copy_(p.detach().reshape(-1))
                    p._set_storage_(view.view(tuple(p.shape)))
                    off += p.numel()
                self._buckets.append(bucket)

    # -- the step -----------------------------------------------------------------------------

    @staticmethod
    def _sync_param_groups(src_param_groups, dst_param_groups):
        """Copies every setting but the params (an lr schedule's edits) from src's groups to dst's."""
        assert len(src_param_groups) == len(dst_param_groups), "mismatched numbers of parameter groups"
        for src, dst in zip(src_param_groups, dst_param_groups):
            for k, v in src.items():
                if k != "params":
                    dst[k] = v

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's gradient (all ranks' shards: backward fills them all), as oar's
        Optimizer.zero_grad does; the next backward starts from none."""
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def _local_step(self, closure=None, **kwargs):
        work = Join.notify_join_context(self)
        mask = self._get_is_trainable_mask()
        if mask != self._is_trainable_mask:
            warnings.warn("ZeroRedundancyOptimizer detected that the trainable parameters changed; rebuilding the "
                          "parameter buckets if enabled")
            self._build_param_buckets()
            self._is_trainable_mask = mask
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        loss = self.optim.step(**kwargs) if closure is None else self.optim.step(closure=closure, **kwargs)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        return loss, work

    def _sync_params(self):
        """Every rank's shard to all: rank r broadcasts the params it updated (or its bucket)."""
        works = []
        for r in range(self.world_size):
            src = get_global_rank(self.process_group, r)
            if self.parameters_as_bucket_view:
                tensors = [self._buckets[r]]
            else:
                tensors = [p.detach() for p in self._local_params(r)]
            for t in tensors:
                works.append(broadcast(t, src=src, group=self.process_group, async_op=True))
        for w in works:
            w.wait()

    def step(self, closure=None, **kwargs):
        """Updates this rank's shard with the local optimizer, then broadcasts every rank's shard; returns
        the closure's loss. Every rank of the group calls it (a joined rank's hook does). With
        overlap_with_ddp=True the DDP hook steps instead: this warns and returns None, as torch's."""
        from ... import jit

        if self._overlap_with_ddp:
            warnings.warn("`step()` should not be included in the training loop when `overlap_with_ddp=True`")
            return None
        if jit._traces:
            raise RuntimeError("ZeroRedundancyOptimizer.step cannot run inside oar.jit.to_static (its parameter "
                               "broadcasts are eager collectives): compile the forward and backward, and call "
                               "step() outside the compiled function")
        loss, work = self._local_step(closure, **kwargs)
        self._sync_params()
        if work is not None:
            work.wait()   # the join context's count, left in flight during the step
        return loss

    # -- overlap with DDP (ddp_zero_hook.hook_with_zero_step) ------------------------------------

    def _check_overlap_initialized(self):
        if self._overlap_with_ddp and self._overlap_info.ddp is None:
            raise RuntimeError("This method should not be called until this ZeroRedundancyOptimizer instance has "
                               "been fully initialized (with overlap_with_ddp=True: register "
                               "ddp_zero_hook.hook_with_zero_step(hook, ddp, zero) on the DDP model first)")

    def _init_zero_for_overlap(self, ddp, shard_buckets):
        """The shards from DDP's buckets, then the local optimizer over this rank's."""
        info = self._overlap_info
        if info.ddp is not None:
            raise RuntimeError("hook_with_zero_step: this ZeroRedundancyOptimizer already steps inside a DDP "
                               "hook; make one ZeroRedundancyOptimizer(overlap_with_ddp=True) per DDP model")
        mine = {id(p) for p in self._all_params}
        buckets = [params for _, _, params in ddp._hook_buckets]
        for params in buckets:
            for p in params:
                if id(p) not in mine:
                    name = next((n for n, q in ddp._named_params if q is p), "?")
                    raise ValueError(f"hook_with_zero_step: the DDP model's parameter '{name}' is not among the "
                                     f"ZeroRedundancyOptimizer's parameters; make it over ddp.parameters()")
        n = self.world_size
        info.assignments = [[] for _ in range(n)]   # per rank: (bucket index, its params there)
        if not shard_buckets:
            for k, params in enumerate(buckets):
                info.assignments[k % n].append((k, list(params)))
        else:   # torch's: buckets by increasing size, cut into runs below total/N, each to the lightest rank
            threshold = sum(p.numel() for ps in buckets for p in ps) / n
            size = [0] * n
            for k, params in sorted(enumerate(buckets), key=lambda kv: sum(p.numel() for p in kv[1])):
                taken, start, run = set(), 0, 0
                for i, p in enumerate(params):
                    if run + p.numel() >= threshold and i > start:
                        r = min((r for r in range(n) if r not in taken), key=lambda r: size[r], default=0)
                        info.assignments[r].append((k, list(params[start:i])))
                        taken.add(r)
                        size[r] += run
                        start, run = i, 0
                    run += p.numel()
                r = min((r for r in range(n) if r not in taken), key=lambda r: size[r], default=0)
                info.assignments[r].append((k, list(params[start:])))
                size[r] += run
            for a in info.assignments:
                a.sort(key=lambda kv: kv[0])
        group = self.param_groups[0]
        self._clear_cache()
        self._partition_cache = []
        for r in range(n):
            g = copy.copy(group)
            g["params"] = [p for _, ps in info.assignments[r] for p in ps]
            self._partition_cache.append([g])
        self.optim = self._optim_constructor(self._partition_cache[self.rank], **self._optim_defaults)
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        info.ddp = ddp

    def _overlap_step(self):
        """The step of hook_with_zero_step, once every bucket's gradients are in .grad: this rank's shard
        updated, then every bucket's parameters broadcast from their owners (bucket order), waited for."""
        if self._get_is_trainable_mask() != self._is_trainable_mask:
            raise RuntimeError("ZeroRedundancyOptimizer with `overlap_with_ddp=True` does not support changing "
                               "parameter trainability at run time")
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        self.optim.step()
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        owners = sorted((k, r, ps) for r, a in enumerate(self._overlap_info.assignments) for k, ps in a)
        works = []
        for _, r, ps in owners:
            src = get_global_rank(self.process_group, r)
            works += [broadcast(p.detach(), src=src, group=self.process_group, async_op=True) for p in ps]
        for w in works:
            w.wait()

    def _overlap_bucket_step(self, index, is_last):
        """hook_with_zero_step_interleaved's share of bucket index, once its average is in .grad: this
        rank's parameters of the bucket updated by the local optimizer (the others' gradients hidden from
        it for the call: each parameter's update is its own op, so the result is the whole step's), then
        the bucket's parameters broadcast from their owners, left in flight while the next buckets step;
        after the last bucket every broadcast is waited for and the step counts as one."""
        info = self._overlap_info
        c = getattr(self.optim, "_c", None)
        if index == 0:   # a step begins (a failed one may have left broadcasts: they are waited for first)
            for w in info.broadcasts or []:
                w.wait()
            if self._get_is_trainable_mask() != self._is_trainable_mask:
                raise RuntimeError("ZeroRedundancyOptimizer with `overlap_with_ddp=True` does not support "
                                   "changing parameter trainability at run time")
            info.broadcasts = []
            info.steps_before = c.steps() if c is not None else 0
            self._sync_param_groups(self.param_groups, self.optim.param_groups)
        mine = {id(p) for k, ps in info.assignments[self.rank] if k == index for p in ps}
        if mine:
            hidden = [(p, p.grad) for p in self.optim.param_groups[0]["params"]
                      if id(p) not in mine and p.grad is not None]
            for p, _ in hidden:
                p.grad = None
            try:
                self.optim.step()
            finally:
                for p, grad in hidden:
                    p.grad = grad
        for r, a in enumerate(info.assignments):
            src = get_global_rank(self.process_group, r)
            for k, ps in a:
                if k == index:
                    info.broadcasts += [broadcast(p.detach(), src=src, group=self.process_group, async_op=True)
                                        for p in ps]
        if is_last:
            works, info.broadcasts = info.broadcasts, None
            for w in works:
                w.wait()
            if c is not None:
                c.set_steps(info.steps_before + 1)
            self._sync_param_groups(self.optim.param_groups, self.param_groups)

    # -- Joinable -----------------------------------------------------------------------------

    def join_hook(self, **kwargs):
        return _ZeROJoinHook(self)

    @property
    def join_device(self):
        return self._default_device

    @property
    def join_process_group(self):
        return self.process_group

    # -- state --------------------------------------------------------------------------------

    def consolidate_state_dict(self, to=0):
        """Gathers every rank's shard of the optimizer state on group rank `to` (every rank calls it);
        state_dict() on that rank then returns the whole state."""
        self._check_overlap_initialized()
        if isinstance(to, bool) or not isinstance(to, int):
            raise TypeError(f"consolidate_state_dict: expected `to` to be an int (a rank of the process group), "
                            f"got {type(to).__name__} {to!r}")
        if not 0 <= to < self.world_size:
            raise RuntimeError(f"consolidate_state_dict: expected `to` to be a rank of the process group, in "
                               f"[0, {self.world_size}), got {to}; pass the rank that will call state_dict()")
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        self._all_state_dicts = []
        for r in range(self.world_size):
            if r == to:
                if self.rank == to:
                    self._all_state_dicts.append(self._local_payload())
                continue
            box = [self._local_payload() if r == self.rank else None]
            broadcast_object_list(box, src=get_global_rank(self.process_group, r), group=self.process_group)
            if self.rank == to:
                self._all_state_dicts.append(box[0])

    def _local_payload(self):
        sd = self.optim.state_dict()
        return {"state": _flat_state(sd), "steps": sd.get("steps", 0)}

    def state_dict(self):
        """The whole optimizer state as consolidated on this rank by the last consolidate_state_dict, in
        the form of a plain oar optimizer's state_dict over the same params ('<index>.<slot>' with the
        params' global indices, param_groups with their 'params' indices), so either loads into the other."""
        if not self._all_state_dicts:
            raise RuntimeError(f"Optimizer state has not been consolidated on this rank. Please call "
                               f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you meant to "
                               f"save the global state.")
        from ... import from_numpy

        index = {id(p): i for i, p in enumerate(self._index_to_param)}
        state = {}
        for r, payload in enumerate(self._all_state_dicts):
            local = self._local_params(r)
            for name, value in payload["state"].items():
                i, slot = name.split(".", 1)
                state[(index[id(local[int(i)])], slot)] = from_numpy(value)
        groups = []
        for g in self.param_groups:
            d = {k: v for k, v in g.items() if k != "params"}
            d["params"] = [index[id(p)] for p in g["params"]]
            groups.append(d)
        return {"state": {f"{i}.{slot}": state[(i, slot)] for i, slot in sorted(state, key=lambda k: k[0])},
                "param_groups": groups, "steps": max(p["steps"] for p in self._all_state_dicts)}

    def load_state_dict(self, state_dict):
        """Loads the whole state (state_dict() of this class, or of a plain oar optimizer over the same
        params): each rank keeps the entries of its shard."""
        self._check_overlap_initialized()
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups ({len(saved_groups)}) "
                             f"than this optimizer ({len(self.param_groups)})")
        for k, (g, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if "params" in saved and len(saved["params"]) != len(g["params"]):
                raise ValueError(f"loaded state dict contains a parameter group that doesn't match the size of "
                                 f"optimizer's group: group {k} has {len(saved['params'])} params there and "
                                 f"{len(g['params'])} here")
        n = len(self._index_to_param)
        local = {id(p): i for i, p in enumerate(self._local_params(self.rank))}
        mine = {}
        for name, value in state_dict["state"].items():
            i, _, slot = str(name).partition(".")
            if not i.isdigit() or not slot or int(i) >= n:
                raise ValueError(f"load_state_dict: expected state names '<param index>.<slot>' with an index in "
                                 f"[0, {n}), got {name!r}")
            p = self._index_to_param[int(i)]
            if id(p) in local:
                mine[f"{local[id(p)]}.{slot}"] = value
        for g, saved in zip(self.param_groups, saved_groups):
            g.update({k: v for k, v in saved.items() if k != "params"})
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        self.optim.load_state_dict({"state": mine, "param_groups": [
            {k: v for k, v in g.items() if k != "params"} for g in self.optim.param_groups]})
