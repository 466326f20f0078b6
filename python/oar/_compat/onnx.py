"""torch.onnx (and its symbolic_helper, symbolic_opset*, operators modules), also oar.onnx:
`export` traces the model with oar's compiler (oar.jit) and writes the program with oar's own
ONNX exporter (oar_onnx_save: opset 17, weights as initializers, fused ops decomposed), not
torch's. Model libraries register symbolic functions for their custom ops at import; the
registry keeps them (torch's exporter would read it; oar's never does), and the symbolic
building blocks, which only torch's exporter calls, say so."""
import enum
import os
import sys
import tempfile

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


class TrainingMode(enum.IntEnum):
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


def _flat_args(args):
    if not isinstance(args, tuple):
        args = (args,)
    if args and isinstance(args[-1], dict):
        if args[-1]:
            raise ValueError("onnx.export: keyword arguments to forward (a dict at the end of args) are not offered; "
                             "pass them positionally")
        args = args[:-1]
    return args


def _specs(tensors, names, dynamic_axes):
    """InputSpecs for the example tensors: the dims dynamic_axes names (a list of axes, or
    {axis: name}) of any size. Returns (specs, the first dynamic dim-0 name or None)."""
    from ..jit import InputSpec

    dim_param = None
    specs = []
    for t, name in zip(tensors, names):
        axes = dynamic_axes.get(name, ())
        if isinstance(axes, dict):
            if 0 in axes and dim_param is None:
                dim_param = str(axes[0])
            axes = list(axes)
        shape = [-1 if d in axes or d - t.dim() in axes else s for d, s in enumerate(t.shape)]
        specs.append(InputSpec(shape, t.dtype, name))
    return specs, dim_param


def export(model, args, f, export_params=True, verbose=False, training=TrainingMode.EVAL, input_names=None,
           output_names=None, operator_export_type=None, opset_version=None, do_constant_folding=True,
           dynamic_axes=None, keep_initializers_as_inputs=None, custom_opsets=None,
           export_modules_as_functions=False):
    """torch.onnx.export on oar: model (a Module or a function of tensors) is run on args (a tensor
    or a tuple of them) by oar's compiler, and the traced program is written to f (a path or a
    binary file object) as an ONNX model of opset 17. The module is exported in eval mode (as
    torch's default TrainingMode.EVAL) and restored after. input_names / output_names name the
    graph's inputs and outputs (default input0..., output0...); dynamic_axes makes the named
    inputs' dims of any size, so one file serves every batch (outputs follow). The options about
    torch's exporter itself (operator_export_type, custom opsets, keeping initializers as inputs,
    functions) and opset versions other than 17 are refused; do_constant_folding is always on."""
    from .. import is_tensor
    from ..jit import StaticFunction
    from ..nn.modules.module import Module

    if opset_version not in (None, 17):
        raise ValueError(f"onnx.export: oar writes opset 17 (the newest its checker knows); got opset_version="
                         f"{opset_version}")
    if not export_params:
        raise ValueError("onnx.export: export_params=False (weights left out of the file) is not offered")
    for flag, name in ((keep_initializers_as_inputs, "keep_initializers_as_inputs"),
                       (custom_opsets, "custom_opsets"), (operator_export_type, "operator_export_type"),
                       (export_modules_as_functions or None, "export_modules_as_functions")):
        if flag:
            raise ValueError(f"onnx.export: {name} is about torch's exporter and is not offered by oar's")
    if training == TrainingMode.TRAINING:
        raise ValueError("onnx.export: training=TrainingMode.TRAINING; oar exports inference programs (eval mode)")
    args = _flat_args(args)
    tensors = [a for a in args if is_tensor(a)]
    if len(tensors) != len(args):
        raise TypeError("onnx.export: expected args of tensors only, got "
                        + ", ".join(type(a).__name__ for a in args if not is_tensor(a)))
    names = list(input_names or [])
    if len(names) > len(tensors):
        raise ValueError(f"onnx.export: {len(names)} input_names for {len(tensors)} inputs")
    names += [f"input{i}" for i in range(len(names), len(tensors))]
    dynamic_axes = dynamic_axes or {}
    unknown = set(dynamic_axes) - set(names) - set(output_names or [])
    if unknown:
        raise ValueError(f"onnx.export: dynamic_axes names {sorted(unknown)}, which are neither input_names nor "
                         f"output_names")
    specs, dim_param = _specs(tensors, names, dynamic_axes)
    modules = (model,) if isinstance(model, Module) else ()
    fn = model.forward if isinstance(model, Module) else model
    if isinstance(fn, StaticFunction):
        fn = fn._fn
    compiled = StaticFunction(fn, specs, modules, output_names=list(output_names) if output_names else None)
    was_training = [(m, m.training) for m in modules]
    if training == TrainingMode.EVAL:
        for m in modules:
            m.eval()
    try:
        compiled(*tensors)
        if compiled._last is None:
            raise RuntimeError("onnx.export: the model could not be compiled into one program (it reads tensor "
                               "values to decide its control flow); branch with oar.cond / oar.while_loop")
        if isinstance(f, (str, os.PathLike)):
            compiled._last.save_onnx(os.fspath(f), dim_param)
        else:  # a binary file object: written to a temporary file first (the exporter writes atomically)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "model.onnx")
                compiled._last.save_onnx(path, dim_param)
                with open(path, "rb") as src:
                    f.write(src.read())
    finally:
        for m, mode in was_training:
            m.train(mode)
    if verbose:
        print(compiled.program())


def is_onnx_log_enabled():
    return False


export_to_pretty_string = _refuse("export_to_pretty_string")
# symbolic building blocks, called only by torch's exporter
select = squeeze = unsqueeze = _cast_Long = _refuse("symbolic_opset")
shape_as_tensor = reshape_from_tensor_shape = _refuse("operators")
operators = sys.modules[__name__]
