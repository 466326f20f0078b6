"""no_grad / enable_grad / set_grad_enabled / inference_mode: context managers and decorators."""
import functools

from . import _C


class _GradMode:
    mode = None

    def __enter__(self):
        self.prev = _C.set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*a, **k):
            with type(self)():
                return fn(*a, **k)

        return wrapped

    def clone(self):
        return type(self)()


class no_grad(_GradMode):
    """Operations inside record nothing for autograd."""
    mode = False


class enable_grad(_GradMode):
    mode = True


class inference_mode(_GradMode):
    def __init__(self, mode=True):
        self.mode = not mode


class set_grad_enabled(_GradMode):
    """Sets grad mode now (as a function) and restores it at the end of a with block."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self.prev = _C.set_grad_enabled(self.mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C.set_grad_enabled(self.prev)
        return False

    def __call__(self, fn):
        mode = self.mode
        _C.set_grad_enabled(self.prev)

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with set_grad_enabled(mode):
                return fn(*a, **k)

        return wrapped


def is_grad_enabled():
    return _C.is_grad_enabled()
