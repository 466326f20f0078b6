"""torch.random: the generator's state. oar has one generator, Philox (counter-based): its whole
state is the seed and how many draws were taken since, 16 bytes, so get_rng_state gives a uint8
tensor of 16 elements (torch's Mersenne Twister gives 5056 bytes; a state of one library does not
load into the other)."""
import contextlib
import os
import struct

from . import _C

_STATE_BYTES = 16


def manual_seed(seed):
    """Seeds oar's generator (Philox: results do not depend on the thread count)."""
    _C.manual_seed(int(seed))


def seed():
    """Seeds the generator from the operating system's entropy and returns the seed (torch.seed)."""
    s = struct.unpack("<Q", os.urandom(8))[0] & ((1 << 63) - 1)
    _C.manual_seed(s)
    return s


def initial_seed():
    """The seed the generator was last seeded with."""
    return _C.rng_get_state()[0]


def get_rng_state():
    """The generator's state as a uint8 tensor (16 bytes: seed and draw offset, little-endian)."""
    from ._creation import tensor
    from ._dtype import uint8

    return tensor(list(struct.pack("<QQ", *_C.rng_get_state())), dtype=uint8)


def set_rng_state(new_state):
    """Restores a state from get_rng_state: the draws after it repeat those after the save."""
    from ._dtype import uint8

    if not hasattr(new_state, "dtype") or new_state.dtype is not uint8:
        got = getattr(new_state, "dtype", type(new_state).__name__)
        raise TypeError(f"set_rng_state: expected a torch.ByteTensor (uint8) from get_rng_state, got {got}")
    if new_state.numel() != _STATE_BYTES:
        raise RuntimeError(f"set_rng_state: expected oar's generator state of {_STATE_BYTES} bytes (its seed and "
                           f"offset), got {new_state.numel()} bytes; a state saved by PyTorch's generator "
                           "does not load into oar's")
    _C.rng_set_state(*struct.unpack("<QQ", bytes(new_state.reshape(-1).tolist())))


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True):
    """Draws inside the block leave the generator as it was before it (torch.random.fork_rng)."""
    if not enabled:
        yield
        return
    state = _C.rng_get_state()
    try:
        yield
    finally:
        _C.rng_set_state(*state)
