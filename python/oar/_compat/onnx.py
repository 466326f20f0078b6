"""torch.onnx (and its symbolic_helper, symbolic_opset*, operators modules): exporting goes
through oar's own exporter, not torch's. Model libraries register symbolic functions for their
custom ops at import; the registry keeps them (torch's exporter would read it; oar's never
does), and calling into torch's exporter says so."""
import sys

symbolics = {}  # "domain::op" -> (function, opset)


def register_custom_op_symbolic(symbolic_name, symbolic_fn, opset_version):
    symbolics[symbolic_name] = (symbolic_fn, opset_version)


def unregister_custom_op_symbolic(symbolic_name, opset_version):
    symbolics.pop(symbolic_name, None)


def parse_args(*arg_descriptors):
    """symbolic_helper.parse_args: says how torch's exporter should hand arguments to a symbolic
    function; the function itself is unchanged."""
    return lambda fn: fn


def is_in_onnx_export():
    return False


def _refuse(name):
    def f(*args, **kwargs):
        raise RuntimeError(f"torch.onnx.{name}: torch's ONNX exporter is not offered by oar; save the compiled "
                           "model with oar.jit.save (its files run in `oar infer`)")

    f.__name__ = name
    return f


export = _refuse("export")
# symbolic building blocks, called only by torch's exporter
select = squeeze = unsqueeze = _cast_Long = _refuse("symbolic_opset")
shape_as_tensor = reshape_from_tensor_shape = _refuse("operators")
operators = sys.modules[__name__]
