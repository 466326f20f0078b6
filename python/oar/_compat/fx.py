"""torch.fx: only `wrap`, which marks a function as a leaf for FX's symbolic tracer; oar has
no FX tracer (it compiles with oar.jit.to_static), so marking changes nothing. Everything
that would trace with FX says so."""


def wrap(fn_or_name):
    return fn_or_name


class _NoFx:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"torch.fx.{type(self).__name__}: FX graph tracing is not offered by oar; "
                           "compile with oar.jit.to_static instead")


class Tracer(_NoFx):
    pass


class GraphModule(_NoFx):
    pass


class Graph(_NoFx):
    pass


def symbolic_trace(*args, **kwargs):
    raise RuntimeError("torch.fx.symbolic_trace: FX graph tracing is not offered by oar; compile with "
                       "oar.jit.to_static instead")


def _copy_attr(from_module, to_module, target):
    raise RuntimeError("torch.fx.graph_module._copy_attr: FX graph modules are not offered by oar")
