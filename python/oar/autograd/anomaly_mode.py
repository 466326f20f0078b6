"""torch.autograd.detect_anomaly / set_detect_anomaly: while on, every gradient rule's results are
scanned during backward (oar_set_detect_anomaly in the C engine) and the first NaN fails the
backward with torch's message naming the op: "Function 'divBackward' returned nan values in its
0th output." Unlike torch, oar records no Python traceback of the forward call."""
import functools
import warnings

from .. import _C

__all__ = ["detect_anomaly", "set_detect_anomaly"]


class detect_anomaly:
    """Context manager and decorator turning anomaly detection on (check_nan=True: NaN gradients raise)."""

    def __init__(self, check_nan=True):
        self.prev = _C.is_anomaly_enabled()
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self):
        _C.set_detect_anomaly(self.check_nan)
        return self

    def __exit__(self, *exc):
        _C.set_detect_anomaly(self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapped


class set_detect_anomaly:
    """Sets anomaly detection now (as a function) and restores it at the end of a with block."""

    def __init__(self, mode, check_nan=True):
        self.prev = _C.is_anomaly_enabled()
        _C.set_detect_anomaly(bool(mode) and check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C.set_detect_anomaly(self.prev)
        return False
