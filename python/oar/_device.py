"""Devices from Python: torch's device arguments ("cpu", "cuda", "cuda:0", torch.device, an int
meaning a CUDA index) turned into oar's device codes, the checks that say why CUDA cannot be
reached (a build without CUDA, a machine without a GPU, an index past the one device oar's
Python tensors use), moves between devices (the table's differentiable `to_device` op), and
`oar.cuda` (availability, synchronize, the caching allocator's statistics)."""
import numbers

from . import _C

CPU, CUDA = 0, 1  # oar_device codes (include/oar.h)


def cuda_state():
    """(oar was built with CUDA, GPUs on this machine)"""
    return _C.cuda_info()


def check_cuda(fn, index=None):
    built, count = cuda_state()
    if not built:
        raise RuntimeError(f"{fn}: oar was built without CUDA, so device 'cuda' cannot be used; rebuild oar with the "
                           "CUDA toolkit (cmake -DOAR_WITH_CUDA=ON) or keep the tensors on 'cpu'")
    if count == 0:
        raise RuntimeError(f"{fn}: no CUDA device: oar was built with CUDA but this machine has no GPU (or no driver); "
                           "keep the tensors on 'cpu' (oar.cuda.is_available() says so beforehand)")
    if index is not None and index != 0:
        raise RuntimeError(f"{fn}: CUDA device {index} requested, but oar's Python tensors use device 0 only "
                           f"(this machine has {count}); use 'cuda' or 'cuda:0'")


def parse(dev, fn):
    """(type, index) of a device argument, checking its form only."""
    if isinstance(dev, numbers.Integral) and not isinstance(dev, bool):
        if dev < 0:
            raise RuntimeError(f"{fn}: expected a non-negative device index, got {dev}")
        return "cuda", int(dev)  # torch: an int names a CUDA device
    if hasattr(dev, "type") and not isinstance(dev, str):  # oar.device, torch.device
        return str(dev.type), getattr(dev, "index", None)
    if not isinstance(dev, str):
        raise TypeError(f"{fn}: expected a device as a str, device or int, got {type(dev).__name__}")
    kind, _, idx = dev.partition(":")
    if kind not in ("cpu", "cuda"):
        raise RuntimeError(f"{fn}: expected a device of type 'cpu' or 'cuda' (oar has those two), got '{dev}'")
    if idx:
        if not idx.isdigit():
            raise RuntimeError(f"{fn}: invalid device string '{dev}': expected an index after ':', as in 'cuda:0'")
        return kind, int(idx)
    return kind, None


def code(dev, fn):
    """oar's device code for a device argument (None stays None); CUDA is checked to be usable."""
    if dev is None:
        return None
    kind, index = parse(dev, fn)
    if kind == "cpu":
        return CPU
    check_cuda(fn, index)
    return CUDA


def move(t, dev_code):
    """t on device dev_code (t itself when it is there): differentiable, as torch's Tensor.to."""
    if dev_code is None or t._device == dev_code:
        return t
    from ._ops import call

    return call("to_device", (t,), {"device": int(dev_code)})


class _Cuda:
    """oar.cuda (torch.cuda's common calls): availability from the build and the machine."""

    @staticmethod
    def is_available():
        built, count = cuda_state()
        return bool(built and count > 0)

    @staticmethod
    def device_count():
        return cuda_state()[1]

    @staticmethod
    def is_built():
        return cuda_state()[0]

    @staticmethod
    def current_device():
        check_cuda("oar.cuda.current_device")
        return 0

    @staticmethod
    def set_device(device):
        kind, index = parse(device, "oar.cuda.set_device")
        check_cuda("oar.cuda.set_device", index)

    @staticmethod
    def manual_seed(seed):
        pass  # oar's one generator serves every device (oar.manual_seed): random tensors are drawn on the host

    manual_seed_all = manual_seed

    @staticmethod
    def synchronize(device=None):
        if _Cuda.is_available():
            _C.synchronize(CUDA)

    # memory (the caching allocator's statistics, docs/cuda.md), torch.cuda's names and keys
    @staticmethod
    def memory_stats(device=None):
        check_cuda("oar.cuda.memory_stats")
        return _C.memory_stats(CUDA, 0)

    @staticmethod
    def memory_allocated(device=None):
        return _Cuda.memory_stats(device)["allocated_bytes.all.current"]

    @staticmethod
    def max_memory_allocated(device=None):
        return _Cuda.memory_stats(device)["allocated_bytes.all.peak"]

    @staticmethod
    def memory_reserved(device=None):
        return _Cuda.memory_stats(device)["reserved_bytes.all.current"]

    @staticmethod
    def reset_peak_memory_stats(device=None):
        check_cuda("oar.cuda.reset_peak_memory_stats")
        _C.memory_stats(CUDA, 1)

    @staticmethod
    def empty_cache():
        if _Cuda.is_available():  # torch: nothing to release without CUDA
            _C.memory_stats(CUDA, 2)


cuda = _Cuda()
