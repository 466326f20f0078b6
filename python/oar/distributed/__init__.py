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
           "reduce_scatter_tensor", "send", "recv", "isend", "irecv", "monitored_barrier"]

_BACKENDS = ("mpi", "gloo")   # both mean oar's MPI communicator on CPU tensors
_state = {"backend": None}


class ReduceOp:
    """The reductions (torch.distributed.ReduceOp's names); PRODUCT and the bitwise ones are not offered."""
    SUM, AVG, MAX, MIN = "sum", "avg", "max", "min"
    PRODUCT, BAND, BOR, BXOR, PREMUL_SUM = "product", "band", "bor", "bxor", "premul_sum"


class _World:
    """The one process group: the world (new_group of every rank returns it)."""

    def __repr__(self):
        return "<oar.distributed world group>"


class GroupMember:
    WORLD = _World()
    NON_GROUP_MEMBER = object()


class group:
    WORLD = GroupMember.WORLD


class Work:
    """A collective in flight (torch's Work): wait() completes it and raises its error."""

    def __init__(self, handle, then=None):
        self._h, self._then = handle, then

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


def _done(handle, async_op, then=None):
    w = Work(handle, then)
    if async_op:
        return w
    w.wait()
    return None


def _check_group(group, who):
    if group is not None and group is not GroupMember.WORLD:
        raise ValueError(f"{who}: expected group=None or the world group (oar has one process group, the world), "
                         f"got {group!r}")


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
    """Ends the job's communication (a barrier, then MPI_Finalize); MPI cannot start again in this process."""
    _check_group(group, "destroy_process_group")
    if not is_initialized():
        return
    _state["backend"] = None
    _C.dist_finalize()


def get_rank(group=None):
    _check_group(group, "get_rank")
    _require_init("get_rank")
    return _C.dist_info()["rank"]


def get_world_size(group=None):
    _check_group(group, "get_world_size")
    _require_init("get_world_size")
    return _C.dist_info()["world_size"]


def get_backend(group=None):
    _check_group(group, "get_backend")
    _require_init("get_backend")
    return _state["backend"]


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """The world group when ranks is None or every rank; sub-groups are not offered."""
    _require_init("new_group")
    n = get_world_size()
    if ranks is None or sorted(ranks) == list(range(n)):
        return GroupMember.WORLD
    raise NotImplementedError(f"new_group: oar has one process group, the world of {n} ranks; got ranks "
                              f"{list(ranks)}")


def barrier(group=None, async_op=False, device_ids=None):
    _check_group(group, "barrier")
    _require_init("barrier")
    return _done(_C.dist_barrier(), async_op)


monitored_barrier = barrier   # every wait is monitored: a dead or silent rank is named


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """tensor = op over the ranks' tensors, in place; summed in rank order (the same bits on every rank)."""
    _check_group(group, "all_reduce")
    _require_init("all_reduce")
    return _done(_C.dist_allreduce(_dense(tensor, "all_reduce"), _op(op, "all_reduce"), True), async_op)


def broadcast(tensor, src, group=None, async_op=False):
    _check_group(group, "broadcast")
    _require_init("broadcast")
    return _done(_C.dist_broadcast(_dense(tensor, "broadcast"), int(src)), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output = the ranks' inputs concatenated along dim 0."""
    _check_group(group, "all_gather_into_tensor")
    _require_init("all_gather_into_tensor")
    who = "all_gather_into_tensor"
    return _done(_C.dist_allgather(_dense(output_tensor, who), _dense(input_tensor, who)), async_op)


_all_gather_base = all_gather_into_tensor


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] = rank r's tensor (one list entry per rank, each shaped like tensor)."""
    _check_group(group, "all_gather")
    _require_init("all_gather")
    from .. import empty

    n = get_world_size()
    if len(tensor_list) != n:
        raise ValueError(f"all_gather: expected a tensor_list of {n} tensors (the world size), got {len(tensor_list)}")
    for k, t in enumerate(tensor_list):
        if tuple(t.shape) != tuple(tensor.shape) or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather: expected tensor_list[{k}] of shape {tuple(tensor.shape)} and "
                             f"{tensor.dtype}, got {tuple(t.shape)} and {t.dtype}")
    src = tensor.contiguous()
    flat = empty((n,) + tuple(tensor.shape), dtype=tensor.dtype)

    def scatter():
        for k, t in enumerate(tensor_list):
            t.copy_(flat[k])

    return _done(_C.dist_allgather(flat, src), async_op, scatter)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output = this rank's block of op over the ranks' inputs (input holds world_size blocks along dim 0)."""
    _check_group(group, "reduce_scatter_tensor")
    _require_init("reduce_scatter_tensor")
    return _done(_C.dist_reduce_scatter(_dense(output, "reduce_scatter_tensor"), _dense(input, "reduce_scatter_tensor"),
                                        _op(op, "reduce_scatter_tensor")), async_op)


_reduce_scatter_base = reduce_scatter_tensor


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output = op over the ranks of their input_list[rank]."""
    _check_group(group, "reduce_scatter")
    _require_init("reduce_scatter")
    from .. import stack

    n = get_world_size()
    if len(input_list) != n:
        raise ValueError(f"reduce_scatter: expected an input_list of {n} tensors (the world size), "
                         f"got {len(input_list)}")
    return reduce_scatter_tensor(output, stack(list(input_list)).contiguous(), op, group, async_op)


def _p2p(who, fn, tensor, peer, tag):
    _require_init(who)
    if peer is None:
        raise ValueError(f"{who}: expected a peer rank (receiving from any source is not offered)")
    return fn(_dense(tensor, who), int(peer), int(tag))


def isend(tensor, dst, group=None, tag=0):
    _check_group(group, "isend")
    return Work(_p2p("isend", _C.dist_send, tensor, dst, tag))


def irecv(tensor, src=None, group=None, tag=0):
    _check_group(group, "irecv")
    return Work(_p2p("irecv", _C.dist_recv, tensor, src, tag))


def send(tensor, dst, group=None, tag=0):
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src=None, group=None, tag=0):
    irecv(tensor, src, group, tag).wait()
    return src
