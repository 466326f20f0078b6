"""torch 1.13's debugging hook: noop_hook leaves each bucket as it is (no communication), to measure
what the gradient synchronization costs a step."""
from ....futures import Future

__all__ = ["noop_hook"]


def noop_hook(_, bucket):
    """A completed Future of the bucket's own gradients: the ranks' gradients are not averaged."""
    fut = Future()
    fut.set_result(bucket.buffer())
    return fut
