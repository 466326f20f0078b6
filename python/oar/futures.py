"""oar.futures: torch.futures' Future (docs/dist.md, "Communication hooks").

A Future holds a value (or an exception) that arrives later: set_result/set_exception complete it,
then(fn) chains a new Future whose value is fn(this one), add_done_callback(fn) runs fn on completion.
A Future made from a collective (Work.get_future()) completes when its collective does; since oar's
collectives progress on oar's own communication thread, nothing in Python runs on their completion:
the Future is completed (and its callbacks run, in the calling thread) by the first wait(), value()
after a wait, or done() that finds the collective finished. So a hook's then() callbacks run where
DistributedDataParallel waits for the bucket, at the end of backward, while the communication
itself overlaps backward. Waiting for a Future made with Future() (one a callback will complete)
completes the collectives' Futures still pending, oldest first, until it is done; if none of them
completes it, wait() raises instead of hanging."""
from typing import Generic, TypeVar

__all__ = ["Future", "collect_all", "wait_all"]

T = TypeVar("T")
_pending = {}   # id -> a collective's Future not completed yet, oldest first (held: its callbacks may be
                # all that completes another Future; dropped as it completes)


class Future(Generic[T]):
    """torch.futures.Future: Future() makes one to complete with set_result; Future[Tensor] is its type
    (the annotation DistributedDataParallel's register_comm_hook accepts)."""

    def __init__(self, *, devices=None):
        self._done = False
        self._value = None
        self._exception = None
        self._callbacks = []
        self._source = None   # what completes it: (wait, is_completed, result) of a collective or a parent

    # -- completion ------------------------------------------------------------------------

    def _complete(self, value=None, exception=None):
        if self._done:
            raise RuntimeError("Attempting to mark a completed Future as complete again. Note that a Future can "
                               "only be marked completed once.")
        self._done, self._value, self._exception = True, value, exception
        _pending.pop(id(self), None)
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def _drive(self, block):
        """Completes this Future from its source when that has finished (or, block, after waiting for it)."""
        if self._done or self._source is None:
            return
        wait, is_completed, result = self._source
        if not block and not is_completed():
            return
        self._source = None
        try:
            wait()
        except Exception as e:  # noqa: BLE001 (the collective's error becomes the Future's)
            if not self._done:
                self._complete(exception=e)
            return
        if not self._done:   # a chained Future was completed by its parent's callback meanwhile
            self._complete(value=result() if callable(result) else result)

    @classmethod
    def _of_work(cls, wait, is_completed, result):
        f = cls()
        f._source = (wait, is_completed, result)
        _pending[id(f)] = f
        return f

    def _drive_pending(self):
        """A Future without a source: completes the pending collectives' Futures in order until it is done."""
        while not self._done and _pending:
            oldest = next(iter(_pending.values()))
            oldest._drive(block=True)
            _pending.pop(id(oldest), None)

    def set_result(self, result):
        """Completes the Future with result and runs its callbacks."""
        self._complete(value=result)

    def set_exception(self, result):
        """Completes the Future with an exception: wait() and value() raise it."""
        if not isinstance(result, BaseException):
            raise TypeError(f"Future.set_exception: expected an exception, got {type(result).__name__}")
        self._complete(exception=result)

    # -- reading -----------------------------------------------------------------------------

    def done(self):
        """Whether the Future holds its value (or exception) yet."""
        self._drive(block=False)
        return self._done

    def wait(self):
        """Blocks until the Future completes and returns its value (raises its exception)."""
        self._drive(block=True)
        if not self._done and self._source is None:
            self._drive_pending()
        if not self._done:
            raise RuntimeError("Future.wait: nothing will complete this Future (it was made by Future() and no "
                               "pending collective's callback calls its set_result); oar runs callbacks in the "
                               "waiting thread, so a wait here would never return")
        if self._exception is not None:
            raise self._exception
        return self._value

    def value(self):
        """The value of a completed Future (raises its exception); call wait() first, or read it in a callback."""
        self._drive(block=False)
        if not self._done:
            raise RuntimeError("Future.value: the Future has not completed yet; call wait(), or read value() "
                               "inside a then() callback")
        if self._exception is not None:
            raise self._exception
        return self._value

    # -- chaining ----------------------------------------------------------------------------

    def then(self, callback):
        """A new Future whose value is callback(this Future), run once this one completes; an exception
        raised by callback becomes the new Future's error."""
        child = Future()

        def run(parent):
            try:
                value = callback(parent)
            except Exception as e:  # noqa: BLE001 (torch's wording, the cause chained)
                err = RuntimeError(f"Got the following error when running the callback: {type(e).__name__}: {e}")
                err.__cause__ = e
                child._complete(exception=err)
                return
            child._complete(value=value)

        def wait_parent():   # the parent's completion runs `run`, which completes the child
            self._drive(block=True)
            if not self._done and self._source is None:
                self._drive_pending()
            if not self._done:
                raise RuntimeError("Future.wait: the Future this one was chained to with then() never completes "
                                   "(nothing calls its set_result)")

        child._source = (wait_parent, self.done, None)
        self.add_done_callback(run)
        return child

    def add_done_callback(self, callback):
        """Runs callback(this Future) when it completes (now, if it has); its exceptions are dropped, as
        torch's are."""
        def guarded(f):
            try:
                callback(f)
            except Exception:  # noqa: BLE001 (torch logs and drops them)
                pass

        if self._done:
            guarded(self)
        else:
            self._callbacks.append(guarded)


def collect_all(futures):
    """A Future whose value is the list of futures, completed once every one of them has."""
    futures = list(futures)
    out = Future()

    def wait():
        for f in futures:
            f._drive(block=True)
            if not f._done and f._source is None:
                f._drive_pending()
        if not all(f._done for f in futures):
            raise RuntimeError("collect_all: a Future in the list never completes (nothing calls its set_result)")

    out._source = (wait, lambda: all(f.done() for f in futures), lambda: futures)
    return out


def wait_all(futures):
    """Waits for every future and returns their values (raises the first error)."""
    return [f.wait() for f in futures]
