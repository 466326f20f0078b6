"""oar.distributed: torch.distributed's process-group API over oar's C communicator
(include/oar/dist.h, docs/dist.md): one world of ranks started by `oar launch` or mpirun, MPI
underneath ("mpi"; "gloo" is accepted as a name for the same CPU backend, so torch code written
for gloo runs unchanged). Collectives run on oar's progress thread; with async_op=True they return
a Work whose wait() completes them. A dead peer or a mismatched collective raises naming the rank,
never hangs (the liveness channel of docs/dist.md).

    import oar.distributed as dist            # or, under oar's torch switch, torch.distributed
    dist.init_process_group("gloo")           # oar launch --nproc 2 -- python3 train.py
    dist.all_reduce(t)                        # sum over ranks, in place
"""
import datetime as _datetime
import os as _os

from .. import _C

__all__ = ["ReduceOp", "Work", "GroupMember", "group", "is_available", "is_initialized", "is_mpi_available",
           "is_gloo_available", "is_nccl_available", "is_torchelastic_launched", "init_process_group",
           "destroy_process_group", "get_rank", "get_world_size", "get_backend", "new_group", "barrier",
           "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "send", "recv", "isend", "irecv", "monitored_barrier", "ProcessGroup",
           "get_group_rank", "get_global_rank", "get_process_group_ranks", "all_to_all", "all_to_all_single",
           "broadcast_object_list", "all_gather_object", "GradBucket", "new_subgroups",
           "new_subgroups_by_enumeration", "BuiltinCommHookType"]

_BACKENDS = ("mpi", "gloo")   # both mean oar's MPI communicator on CPU tensors
_state = {"backend": None}


class ReduceOp:
    """The reductions (torch.distributed.ReduceOp's names); PRODUCT and the bitwise ones are not offered."""
    SUM, AVG, MAX, MIN = "sum", "avg", "max", "min"
    PRODUCT, BAND, BOR, BXOR, PREMUL_SUM = "product", "band", "bor", "bxor", "premul_sum"


class BuiltinCommHookType:
    """The communication hooks DistributedDataParallel._register_builtin_comm_hook takes (torch's enum):
    ALLREDUCE averages as DDP does without a hook, FP16_COMPRESS allreduces the bucket in float16."""
    ALLREDUCE, FP16_COMPRESS = "ALLREDUCE", "FP16_COMPRESS"


class _World:
    """The default process group: every rank of the job."""

    def rank(self):
        return _C.dist_info()["rank"]

    def size(self):
        return _C.dist_info()["world_size"]

    def __repr__(self):
        return "<oar.distributed world group>"


class _NonGroupMember:
    """What new_group returns on a rank outside the group (torch's GroupMember.NON_GROUP_MEMBER)."""

    def __repr__(self):
        return "<oar.distributed NON_GROUP_MEMBER>"


class GroupMember:
    WORLD = _World()
    NON_GROUP_MEMBER = _NonGroupMember()


class group:
    WORLD = GroupMember.WORLD


class ProcessGroup:
    """A process group of some ranks (new_group): a sub-communicator of the world (an MPI_Comm_split
    in oar's C layer, include/oar/dist.h). rank() and size() are this process's within it."""

    def __init__(self, handle, ranks, backend):
        self._h, self._ranks, self._backend = handle, list(ranks), backend

    def rank(self):
        return self._h.rank()

    def size(self):
        return len(self._ranks)

    def __repr__(self):
        return f"<oar.distributed ProcessGroup of ranks {self._ranks}>"


class Work:
    """A collective in flight (torch's Work): wait() completes it and raises its error; get_future() gives
    an oar.futures.Future of its output tensors (completed by a wait, see oar.futures)."""

    def __init__(self, handle, then=None, result=None):
        self._h, self._then, self._result = handle, then, result

    def wait(self, timeout=None):
        self._h.wait()
        if self._then is not None:
            then, self._then = self._then, None
            then()
        return True

    def is_completed(self):
        return self._h.is_completed()

    def is_success(self):
        return self.is_completed()

    def get_future(self):
        """A Future whose value is the list of the collective's output tensors (torch's), e.g. [tensor] for
        all_reduce; offered for all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor and
        barrier (torch has none for send and recv either)."""
        if self._result is None:
            raise RuntimeError("Work.get_future: offered for all_reduce, broadcast, all_gather_into_tensor, "
                               "reduce_scatter_tensor and barrier; wait() on this work instead")
        from ..futures import Future

        return Future._of_work(self.wait, self.is_completed, list(self._result))


class GradBucket:
    """One gradient bucket of DistributedDataParallel, as a communication hook sees it (torch's
    dist.GradBucket): buffer() is the bucket's flat gradient tensor (not divided by the world size;
    writing it writes the parameters' .grad), gradients() its per-parameter views, parameters() the
    parameters, index() its position (0 = the first reduced, holding the last layers), is_last()."""

    def __init__(self, index, buffer, gradients, parameters, is_last):
        self._index, self._buffer, self._gradients = index, buffer, gradients
        self._parameters, self._is_last = parameters, is_last

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer):
        """Replaces what buffer() returns (a compression wrapper's compressed copy); the bucket itself is
        left alone: the hook's Future's value is what DistributedDataParallel writes into it."""
        self._buffer = buffer

    def gradients(self):
        return list(self._gradients)

    def parameters(self):
        return list(self._parameters)

    def is_last(self):
        return self._is_last

    def __repr__(self):
        return f"<GradBucket {self._index} of {len(self._parameters)} parameters, {self._buffer.numel()} elements>"


def _done(handle, async_op, then=None, result=None):
    w = Work(handle, then, result)
    if async_op:
        return w
    w.wait()
    return None


_groups = []   # live ProcessGroups (destroy_process_group() of the world ends them)


def _resolve(group, who):
    """(the C handle or None for the world, the group) for a collective; raises for other objects."""
    if group is None or group is GroupMember.WORLD:
        return None
    if isinstance(group, ProcessGroup):
        if group._h is None:
            raise RuntimeError(f"{who}: the process group {group!r} was destroyed (destroy_process_group)")
        return group._h
    raise ValueError(f"{who}: expected group=None, group.WORLD or a group from new_group, got {group!r}")


def _not_in(group, who):
    """True (with torch's warning) when this rank is outside group: the collective is a no-op."""
    if group is GroupMember.NON_GROUP_MEMBER:
        import warnings

        warnings.warn(f"Running {who} on global rank {get_rank()} which does not belong to the given group.")
        return True
    return False


def _check_group(group, who):
    _resolve(group, who)


def _group_size(group):
    return get_world_size() if group is None or group is GroupMember.WORLD else group.size()


def _to_group_rank(group, global_rank, who):
    """torch's src/dst arguments are global ranks; the C layer takes the group's."""
    if group is None or group is GroupMember.WORLD:
        return int(global_rank)
    if global_rank not in group._ranks:
        raise RuntimeError(f"{who}: Global rank {global_rank} is not part of group {group!r} (its ranks are "
                           f"{group._ranks})")
    return group._ranks.index(global_rank)


def _op(op, who):
    if op in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX, ReduceOp.MIN):
        return op
    raise ValueError(f"{who}: expected ReduceOp.SUM, AVG, MAX or MIN, got {op!r} (oar's communicator has no "
                     f"{op!r} reduction)")


def _dense(tensor, who):
    if not tensor.is_contiguous():
        raise RuntimeError(f"{who}: Tensors must be contiguous (collectives read and write the tensor's memory in "
                           f"place); pass t.contiguous() and copy the result back")
    return tensor


def _require_init(who):
    if not is_initialized():
        raise RuntimeError(f"{who}: Default process group has not been initialized, please make sure to call "
                           f"init_process_group.")


def is_available():
    return True


def is_initialized():
    return _state["backend"] is not None


def is_mpi_available():
    return True


def is_gloo_available():
    return True   # as a name for the MPI backend


def is_nccl_available():
    return False  # Python tensors are on the CPU in this version


def is_torchelastic_launched():
    return _os.environ.get("TORCHELASTIC_RUN_ID") is not None


def _timeout_ms(timeout):
    if timeout is None:
        return 0
    seconds = timeout.total_seconds() if isinstance(timeout, _datetime.timedelta) else float(timeout)
    if seconds <= 0:
        raise ValueError(f"init_process_group: expected a positive timeout, got {timeout!r}")
    return int(min(seconds * 1000, 2 ** 31 - 1))


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None):
    """Joins the world the launcher started (`oar launch --nproc N -- python3 script.py`, or mpirun).

    backend: "mpi" or "gloo" (the same CPU communicator); "nccl" is refused (CPU tensors only).
    The rank and size come from the launcher; world_size and rank, when given, must agree with it.
    init_method and store are not needed (MPI exchanges the endpoints) and are ignored.
    timeout: a collective that makes no progress this long fails naming the ranks it waits for."""
    name = "mpi" if backend is None else str(backend).lower()
    if name not in _BACKENDS:
        raise ValueError(f"init_process_group: expected backend 'mpi' or 'gloo' (oar runs both as its MPI "
                         f"communicator on CPU tensors), got {backend!r}")
    if is_initialized():
        raise RuntimeError("init_process_group: trying to initialize the default process group twice!")
    _C.dist_init(collective_timeout_ms=_timeout_ms(timeout))
    info = _C.dist_info()
    env_size = _os.environ.get("WORLD_SIZE")
    if env_size is not None and int(env_size) != info["world_size"]:
        raise RuntimeError(f"init_process_group: WORLD_SIZE={env_size} but the MPI launcher started "
                           f"{info['world_size']} rank(s); oar's ranks come from mpirun: start the job with "
                           f"`oar launch --nproc {env_size} -- python3 script.py` instead of torchrun")
    for what, given, have in (("world_size", world_size, info["world_size"]), ("rank", rank, info["rank"])):
        if given is not None and given >= 0 and given != have:
            raise ValueError(f"init_process_group: {what}={given} but the launcher gave this process "
                             f"{what}={have}; leave it out (-1) or start the job with the matching launcher")
    _state["backend"] = name


def destroy_process_group(group=None):
    """destroy_process_group(): ends the job's communication (its groups first, then a barrier and
    MPI_Finalize; MPI cannot start again in this process). destroy_process_group(g): frees group g's
    communicator (a no-op for NON_GROUP_MEMBER, as in torch)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group is not None and group is not GroupMember.WORLD:
        h = _resolve(group, "destroy_process_group")
        if group in _groups:
            _groups.remove(group)
        group._h = None
        h.destroy()
        return
    if not is_initialized():
        return
    for g in list(_groups):
        g._h, h = None, g._h
        h.destroy()
    del _groups[:]
    _state["backend"] = None
    _C.dist_finalize()


def get_rank(group=None):
    """This process's rank in group (the world by default); -1 outside the group, as in torch."""
    _require_init("get_rank")
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    h = _resolve(group, "get_rank")
    return _C.dist_info()["rank"] if h is None else h.rank()


def get_world_size(group=None):
    """The number of ranks in group (the world by default); -1 outside the group, as in torch."""
    _require_init("get_world_size")
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    h = _resolve(group, "get_world_size")
    return _C.dist_info()["world_size"] if h is None else group.size()


def get_backend(group=None):
    _require_init("get_backend")
    if group is GroupMember.NON_GROUP_MEMBER:
        raise RuntimeError("get_backend: Invalid process group specified (this rank is not a member)")
    _resolve(group, "get_backend")
    return _state["backend"] if group is None or group is GroupMember.WORLD else group._backend


def get_group_rank(group, global_rank):
    """group's rank of the world rank global_rank (identity for the world); RuntimeError if it is not a member."""
    if group is None or group is GroupMember.WORLD:
        return global_rank
    if not isinstance(group, ProcessGroup):
        raise RuntimeError(f"get_group_rank: Group {group!r} is not registered, please create group with "
                           f"new_group")
    if global_rank not in group._ranks:
        raise RuntimeError(f"get_group_rank: Global rank {global_rank} is not part of group {group!r}")
    return group._ranks.index(global_rank)


def get_global_rank(group, group_rank):
    """The world rank of group's rank group_rank (identity for the world); RuntimeError if out of range."""
    if group is None or group is GroupMember.WORLD:
        return group_rank
    if not isinstance(group, ProcessGroup):
        raise RuntimeError(f"get_global_rank: Group {group!r} is not registered, please create group with "
                           f"new_group")
    if not 0 <= group_rank < len(group._ranks):
        raise RuntimeError(f"get_global_rank: Group rank {group_rank} is not part of group {group!r} (it has "
                           f"{len(group._ranks)} ranks)")
    return group._ranks[group_rank]


def get_process_group_ranks(group):
    """The world ranks of group, in group-rank order."""
    if group is None or group is GroupMember.WORLD:
        return list(range(get_world_size()))
    return list(group._ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A process group of the given world ranks (all of them by default): a collective that every rank of
    the world calls with the same ranks, in the same order as its other new_group calls. Group rank k is
    the k-th smallest of ranks. Returns GroupMember.NON_GROUP_MEMBER on the ranks outside it (their
    get_rank/get_world_size of it are -1 and its collectives do nothing, with a warning, as in torch).
    The ranks must lie in [0, world size) without repeats; a rank that asks for other ranks than the
    others makes new_group fail on every rank, naming both. timeout and pg_options: the job's."""
    _require_init("new_group")
    n = get_world_size()
    if backend is not None and str(backend).lower() not in _BACKENDS:
        raise ValueError(f"new_group: expected backend None, 'mpi' or 'gloo', got {backend!r}")
    if ranks is None:
        ranks = list(range(n))
    ranks = list(ranks)
    if len(ranks) > n:
        raise RuntimeError(f"new_group: the new group's world size should be less or equal to the world size set "
                           f"by init_process_group ({n}), got {len(ranks)} ranks {ranks}")
    for r in ranks:
        if not isinstance(r, int) or isinstance(r, bool):
            raise TypeError(f"new_group: expected integer ranks, got {r!r} in {ranks}")
        if r < 0 or r >= n:
            raise RuntimeError(f"new_group: The new group's rank should be within the world_size set by "
                               f"init_process_group: expected ranks in [0, {n}), got {r} in {ranks}")
    ranks = sorted(ranks)
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"new_group: expected distinct ranks, got {ranks}")
    h = _C.DistGroup(ranks)   # a collective over the world: compares the ranks, then splits
    if h.rank() < 0:
        h.destroy()
        return GroupMember.NON_GROUP_MEMBER
    g = ProcessGroup(h, ranks, str(backend).lower() if backend is not None else _state["backend"])
    _groups.append(g)
    return g


def _ranks_per_host():
    """The number of ranks on this machine, as the launcher tells it (mpirun, oar launch or torchrun)."""
    for name in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE"):
        v = _os.environ.get(name, "")
        if v.isdigit() and int(v) > 0:
            return int(v)
    return None


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None):
    """torch's new_subgroups: the world cut into groups of group_size consecutive ranks (every rank calls
    it); returns (this rank's subgroup, all of them). group_size=None: torch takes the number of CUDA
    devices per machine and refuses without CUDA; oar's groups run on host tensors, so None means the
    ranks on this machine (the launcher's local size), and no CUDA is needed. group is ignored, as in
    torch 1.13."""
    if group_size is None:
        group_size = _ranks_per_host()
        if group_size is None:
            raise ValueError("new_subgroups: group_size=None means the ranks on this machine, and the launcher "
                             "did not say how many there are (no OMPI_COMM_WORLD_LOCAL_SIZE or LOCAL_WORLD_SIZE); "
                             "pass group_size")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"The arg 'group_size' must be greater than 0, got {group_size!r}")
    n = get_world_size()
    if n < group_size:
        raise ValueError(f"The arg 'group_size' must not exceed the world size ({group_size} > {n})")
    if n % group_size != 0:
        raise ValueError(f"The world size must be divisible by 'group_size' ({n} % {group_size} != 0)")
    return new_subgroups_by_enumeration([list(range(k, k + group_size)) for k in range(0, n, group_size)],
                                        timeout=timeout, backend=backend, pg_options=pg_options)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None):
    """torch's new_subgroups_by_enumeration: one group per list of ranks (every rank calls it with the same
    lists; a rank in two lists is a ValueError, as in torch); returns (this rank's subgroup or None, all
    of them). Without CUDA, as new_subgroups."""
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    me, mine, subgroups, seen = get_rank(), None, [], set()
    for ranks in ranks_per_subgroup_list:
        for r in ranks:
            if r in seen:
                raise ValueError(f"Rank {r} has appeared in both subgroup {sorted(seen)} and {list(ranks)}")
        seen.update(ranks)
        g = new_group(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options)
        subgroups.append(g)
        if me in ranks:
            mine = g
    return mine, subgroups


def _prologue(group, who):
    """None when this rank is outside group (torch's warning and no-op), else the C group handle."""
    _require_init(who)
    if _not_in(group, who):
        return False, None
    return True, _resolve(group, who)


def barrier(group=None, async_op=False, device_ids=None):
    ok, h = _prologue(group, "barrier")
    if not ok:
        return None
    return _done(_C.dist_barrier(h), async_op, result=[])


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch's monitored_barrier: rank 0 of the group waits up to timeout for every other rank to check
    in, and raises naming the first rank that did not (every rank, with wait_all_ranks=True); the others
    wait for rank 0's release. timeout: a timedelta or seconds (default: the job's collective timeout,
    which also bounds every wait)."""
    import time

    ok, h = _prologue(group, "monitored_barrier")
    if not ok:
        return None
    from .. import zeros, int64

    me, n = get_rank(group), get_world_size(group)
    if n == 1:
        return None
    limit = None if timeout is None else (timeout.total_seconds() if isinstance(timeout, _datetime.timedelta)
                                          else float(timeout))
    token = zeros(1, dtype=int64)
    if me != 0:
        _C.dist_send(token, 0, _TAG_MONITORED, h).wait()
        _C.dist_recv(token, 0, _TAG_MONITORED, h).wait()
        return None
    works = {r: _C.dist_recv(zeros(1, dtype=int64), r, _TAG_MONITORED, h) for r in range(1, n)}
    start = time.monotonic()
    while any(not w.is_completed() for w in works.values()):
        if limit is not None and time.monotonic() - start > limit:
            late = [r for r, w in works.items() if not w.is_completed()]
            _abandoned.extend(works.values())   # still posted: never freed while MPI may write them
            ms = int(limit * 1000)
            if wait_all_ranks:
                raise RuntimeError(f"monitored_barrier: Ranks {', '.join(map(str, late))} failed to pass "
                                   f"monitoredBarrier in {ms} ms")
            raise RuntimeError(f"monitored_barrier: Rank {late[0]} failed to pass monitoredBarrier in {ms} ms")
        time.sleep(0.001)
    for w in works.values():
        w.wait()   # raises a dead peer's error
    for w in [_C.dist_send(token, r, _TAG_MONITORED, h) for r in range(1, n)]:
        w.wait()
    return None


_TAG_MONITORED, _TAG_ALL_TO_ALL = 30000, 29999
_abandoned = []


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """tensor = op over the ranks' tensors, in place; summed in rank order (the same bits on every rank)."""
    ok, h = _prologue(group, "all_reduce")
    if not ok:
        return None
    return _done(_C.dist_allreduce(_dense(tensor, "all_reduce"), _op(op, "all_reduce"), True, h), async_op,
                 result=[tensor])


def broadcast(tensor, src, group=None, async_op=False):
    """tensor = rank src's tensor; src is a world rank (torch's convention), a member of group."""
    ok, h = _prologue(group, "broadcast")
    if not ok:
        return None
    root = _to_group_rank(group, src, "broadcast")
    return _done(_C.dist_broadcast(_dense(tensor, "broadcast"), root, h), async_op, result=[tensor])


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output = the ranks' inputs concatenated along dim 0."""
    who = "all_gather_into_tensor"
    ok, h = _prologue(group, who)
    if not ok:
        return None
    return _done(_C.dist_allgather(_dense(output_tensor, who), _dense(input_tensor, who), h), async_op,
                 result=[output_tensor])


_all_gather_base = all_gather_into_tensor


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] = group rank r's tensor (one list entry per rank of the group, each shaped like tensor)."""
    ok, h = _prologue(group, "all_gather")
    if not ok:
        return None
    from .. import empty

    n = _group_size(group)
    if len(tensor_list) != n:
        raise ValueError(f"all_gather: expected a tensor_list of {n} tensors (the group's size), got "
                         f"{len(tensor_list)}")
    for k, t in enumerate(tensor_list):
        if tuple(t.shape) != tuple(tensor.shape) or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather: expected tensor_list[{k}] of shape {tuple(tensor.shape)} and "
                             f"{tensor.dtype}, got {tuple(t.shape)} and {t.dtype}")
    src = tensor.contiguous()
    flat = empty((n,) + tuple(tensor.shape), dtype=tensor.dtype)

    def scatter():
        for k, t in enumerate(tensor_list):
            t.copy_(flat[k])

    return _done(_C.dist_allgather(flat, src, h), async_op, scatter)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output = this rank's block of op over the ranks' inputs (input holds group-size blocks along dim 0)."""
    who = "reduce_scatter_tensor"
    ok, h = _prologue(group, who)
    if not ok:
        return None
    return _done(_C.dist_reduce_scatter(_dense(output, who), _dense(input, who), _op(op, who), h), async_op,
                 result=[output])


_reduce_scatter_base = reduce_scatter_tensor


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output = op over the ranks of their input_list[group rank]."""
    ok, h = _prologue(group, "reduce_scatter")
    if not ok:
        return None
    from .. import stack

    n = _group_size(group)
    if len(input_list) != n:
        raise ValueError(f"reduce_scatter: expected an input_list of {n} tensors (the group's size), "
                         f"got {len(input_list)}")
    return reduce_scatter_tensor(output, stack(list(input_list)).contiguous(), op, group, async_op)


def _p2p(who, fn, tensor, peer, tag, group):
    ok, h = _prologue(group, who)
    if not ok:
        return None
    if peer is None:
        raise ValueError(f"{who}: expected a peer rank (receiving from any source is not offered)")
    return fn(_dense(tensor, who), _to_group_rank(group, peer, who), int(tag), h)


def isend(tensor, dst, group=None, tag=0):
    """Sends to world rank dst (a member of group); wait() on the result."""
    w = _p2p("isend", _C.dist_send, tensor, dst, tag, group)
    return None if w is None else Work(w)


def irecv(tensor, src=None, group=None, tag=0):
    """Receives from world rank src (a member of group); wait() on the result."""
    w = _p2p("irecv", _C.dist_recv, tensor, src, tag, group)
    return None if w is None else Work(w)


def send(tensor, dst, group=None, tag=0):
    w = isend(tensor, dst, group, tag)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0):
    w = irecv(tensor, src, group, tag)
    if w is None:
        return -1
    w.wait()
    return src


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
    """output's block r = group rank r's block (of this rank) of its input: equal blocks along dim 0
    (split sizes None), or the given row counts."""
    ok, h = _prologue(group, "all_to_all_single")
    if not ok:
        return None
    n = _group_size(group)
    rows_in, rows_out = input.shape[0] if input.dim() else 0, output.shape[0] if output.dim() else 0
    if input_split_sizes is None:
        if rows_in % n:
            raise ValueError(f"all_to_all_single: expected input.shape[0] divisible by the group's size {n}, got "
                             f"{rows_in}; pass input_split_sizes")
        input_split_sizes = [rows_in // n] * n
    if output_split_sizes is None:
        if rows_out % n:
            raise ValueError(f"all_to_all_single: expected output.shape[0] divisible by the group's size {n}, got "
                             f"{rows_out}; pass output_split_sizes")
        output_split_sizes = [rows_out // n] * n
    for what, sizes, rows in (("input", input_split_sizes, rows_in), ("output", output_split_sizes, rows_out)):
        if len(sizes) != n or sum(sizes) != rows or min(sizes) < 0:
            raise ValueError(f"all_to_all_single: expected {n} non-negative {what}_split_sizes summing to "
                             f"{what}.shape[0] = {rows}, got {list(sizes)}")
    ins = list(input.split(list(input_split_sizes), 0))
    outs = list(output.split(list(output_split_sizes), 0))
    return all_to_all(outs, ins, group, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """output_tensor_list[r] = group rank r's input_tensor_list[this rank] (point-to-point messages)."""
    ok, h = _prologue(group, "all_to_all")
    if not ok:
        return None
    n, me = _group_size(group), get_rank(group)
    if len(input_tensor_list) != n or len(output_tensor_list) != n:
        raise ValueError(f"all_to_all: expected {n} input and {n} output tensors (the group's size), got "
                         f"{len(input_tensor_list)} and {len(output_tensor_list)}")
    for k in range(n):
        if output_tensor_list[k].dtype != input_tensor_list[k].dtype:
            raise ValueError(f"all_to_all: expected output {k} and input {k} of one dtype, got "
                             f"{output_tensor_list[k].dtype} and {input_tensor_list[k].dtype}")
    outs = [t if t.is_contiguous() else t.contiguous() for t in output_tensor_list]
    works = []
    for r in range(n):
        if r == me:
            continue
        works.append(_C.dist_recv(outs[r], r, _TAG_ALL_TO_ALL, h))
        works.append(_C.dist_send(input_tensor_list[r].contiguous(), r, _TAG_ALL_TO_ALL, h))

    def finish():
        for w in works:
            w.wait()
        outs[me].copy_(input_tensor_list[me])
        for t, o in zip(output_tensor_list, outs):
            if t is not o:
                t.copy_(o)

    w = Work(_Many(works), finish)
    if async_op:
        return w
    w.wait()
    return None


class _Many:
    """Several C works as one (all_to_all's messages)."""

    def __init__(self, works):
        self._works = works

    def wait(self):
        err = None
        for w in self._works:
            try:
                w.wait()
            except Exception as e:  # wait for all: their buffers must not be freed in flight
                err = err or e
        if err is not None:
            raise err

    def is_completed(self):
        return all(w.is_completed() for w in self._works)


def _object_tensor(obj):
    """obj pickled into an int64 tensor (8 bytes an element) and its byte count."""
    import pickle

    import numpy as np

    from .. import from_numpy

    data = pickle.dumps(obj)
    padded = data + b"\0" * (-len(data) % 8)
    return from_numpy(np.frombuffer(padded, dtype=np.int64).copy()), len(data)


def _tensor_object(t, nbytes):
    import pickle

    return pickle.loads(t.numpy().tobytes()[:nbytes])


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """object_list[i] = world rank src's object_list[i] (pickled; every rank passes a list of that length)."""
    ok, h = _prologue(group, "broadcast_object_list")
    if not ok:
        return None
    from .. import tensor as _tensor, zeros, int64

    me = get_rank()
    if me == src:
        parts = [_object_tensor(o) for o in object_list]
        sizes = _tensor([p[1] for p in parts], dtype=int64)
    else:
        sizes = zeros(len(object_list), dtype=int64)
    broadcast(sizes, src, group)
    n_bytes = [int(v) for v in sizes.tolist()]
    flat = zeros(max(1, sum((b + 7) // 8 for b in n_bytes)), dtype=int64)
    if me == src:
        from .. import cat

        flat = cat([p[0] for p in parts]) if parts else flat
    broadcast(flat, src, group)
    if me != src:
        off = 0
        for i, b in enumerate(n_bytes):
            k = (b + 7) // 8
            object_list[i] = _tensor_object(flat[off:off + k], b)
            off += k
    return None


def all_gather_object(object_list, obj, group=None):
    """object_list[r] = group rank r's obj (pickled)."""
    ok, h = _prologue(group, "all_gather_object")
    if not ok:
        return None
    from .. import tensor as _tensor, zeros, int64

    n = _group_size(group)
    if len(object_list) != n:
        raise ValueError(f"all_gather_object: expected an object_list of {n} entries (the group's size), got "
                         f"{len(object_list)}")
    mine, nbytes = _object_tensor(obj)
    sizes = zeros(n, dtype=int64)
    all_gather_into_tensor(sizes, _tensor([nbytes], dtype=int64), group)
    n_bytes = [int(v) for v in sizes.tolist()]
    most = max(1, max((b + 7) // 8 for b in n_bytes))
    padded = zeros(most, dtype=int64)
    padded[:mine.shape[0]] = mine
    out = zeros(n * most, dtype=int64)
    all_gather_into_tensor(out, padded, group)
    for r in range(n):
        object_list[r] = _tensor_object(out[r * most:(r + 1) * most], n_bytes[r])
    return None
