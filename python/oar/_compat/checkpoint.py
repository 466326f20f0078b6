"""torch.utils.checkpoint: activation checkpointing. oar keeps the activations (no
recomputation), which gives the same values and gradients with more memory."""


def checkpoint(function, *args, use_reentrant=True, **kwargs):
    kwargs.pop("preserve_rng_state", None)
    return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=True, **kwargs):
    for f in (functions.children() if hasattr(functions, "children") else functions):
        input = f(input)
    return input
