"""The parts of torch's namespace that real model files import but that are not about tensors
(torch.hub, torch.fx, torch.onnx, torch.version, torch.utils.checkpoint,
torch.utils.model_zoo, torch.jit.annotations, torch._C's logging hooks). The torch switch
(_mock.py) installs them beside oar's own modules.

Each name does what it does in torch where that is meaningful without TorchScript, FX or
libtorch (fx.wrap marks a function for a tracer oar does not have, so it returns it as it is).
What needs those machineries (FX tracing, ONNX export through torch, libtorch extension
libraries) raises
an error naming the call and the oar alternative; nothing computes a stand-in result."""
import sys

# torch module name -> oar._compat submodule
SUBMODULES = {
    "torch.hub": "hub",
    "torch.utils.model_zoo": "hub",
    "torch.fx": "fx",
    "torch.fx.graph_module": "fx",
    "torch.onnx": "onnx",
    "torch.onnx.symbolic_helper": "onnx",
    "torch.onnx.symbolic_opset9": "onnx",
    "torch.onnx.symbolic_opset11": "onnx",
    "torch.onnx.operators": "onnx",
    "torch.version": "version",
    "torch.utils.checkpoint": "checkpoint",
    "torch.jit.annotations": "annotations",
}


def modules():
    """{torch name: module} for the torch switch."""
    import importlib

    return {name: importlib.import_module(f"{__name__}.{sub}") for name, sub in SUBMODULES.items()}


def _log_api_usage_once(event):
    """torch._C._log_api_usage_once: usage logging for a callback oar never has."""


def _get_tracing_state():
    """torch._C._get_tracing_state: None: oar's torch.jit.trace records with oar's tracer, which keeps no
    TorchScript tracing state (torch.jit.is_tracing() says whether one runs)."""
    return None


C_HOOKS = {"_log_api_usage_once": _log_api_usage_once, "_get_tracing_state": _get_tracing_state}
