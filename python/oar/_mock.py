"""Running unmodified PyTorch code on oar: `import torch` (and torch.nn, torch.nn.functional,
torch.optim, torch.utils.data, torch.autograd) resolve to oar's modules, and the names of torch's
namespace that model files import without computing with them (torch.hub, torch.fx,
torch.jit.annotations, ...) resolve to oar._compat.

    with oar.mock_torch():       # only inside the block (previous modules restored after)
        import model_file
    oar.mock_torch(enable=True)  # from now on (or OAR_MOCK_TORCH=1 with `import oar` first,
                                 #  or `python -m oar.mock script.py`)
"""
import sys

_NAMES = ("torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.parameter", "torch.nn.modules",
          "torch.nn.modules.utils", "torch.nn.modules.batchnorm", "torch.nn.modules.instancenorm",
          "torch.nn.modules.lazy",
          "torch.nn.utils", "torch.nn.utils.rnn", "torch.nn.utils.parametrize", "torch.nn.utils.parametrizations",
          "torch.nn.utils.stateless", "torch.nn.utils.fusion", "torch.nn.utils.spectral_norm",
          "torch.nn.utils.convert_parameters", "torch.optim", "torch.optim.lr_scheduler", "torch.utils",
          "torch.utils.data", "torch.utils.checkpoint", "torch.random", "torch.autograd", "torch.autograd.function",
          "torch.jit", "torch.distributed",
          "torch.distributed.algorithms", "torch.distributed.algorithms.join", "torch.distributed.optim",
          "torch.distributed.optim.zero_redundancy_optimizer", "torch.nn.parallel", "torch.utils.data.distributed",
          "torch.special", "torch.linalg",
          "torch.futures", "torch.distributed.algorithms.ddp_comm_hooks",
          "torch.distributed.algorithms.ddp_comm_hooks.default_hooks",
          "torch.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook",
          "torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook",
          "torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook",
          "torch.distributed.algorithms.model_averaging", "torch.distributed.algorithms.model_averaging.averagers",
          "torch.distributed.algorithms.model_averaging.utils", "torch.distributed.optim.post_localSGD_optimizer",
          "torch.amp", "torch.amp.autocast_mode", "torch.cpu", "torch.cpu.amp", "torch.cuda", "torch.cuda.amp")
# torch's quantization namespaces, all served by oar.ao (torch 1.13 has the nn ones both under
# torch.ao.nn and under their older torch.nn names): torch module name -> oar module name
_QUANT_NN = ("quantized", "quantized.dynamic", "intrinsic", "intrinsic.quantized", "qat", "intrinsic.qat")
_QUANT = {"torch.ao": "oar.ao", "torch.ao.nn": "oar.ao.nn", "torch.quantization": "oar.ao.quantization",
          **{f"torch.ao.quantization{m}": f"oar.ao.quantization{m}"
             for m in ("", ".observer", ".qconfig", ".fuse_modules", ".fake_quantize", ".quantize", ".stubs")},
          **{f"torch{ao}.nn.{m}": f"oar.ao.nn.{m}" for m in _QUANT_NN for ao in ("", ".ao")}}
# attributes of oar's modules that only the switch adds: (module, attribute, torch module name)
_ATTRS = (("oar", "hub", "torch.hub"), ("oar", "fx", "torch.fx"), ("oar", "onnx", "torch.onnx"),
          ("oar", "version", "torch.version"),
          ("oar.utils", "checkpoint", "torch.utils.checkpoint"), ("oar.utils", "model_zoo", "torch.utils.model_zoo"),
          ("oar.jit", "annotations", "torch.jit.annotations"))


def _oar_modules():
    import oar

    mods = {name: sys.modules["oar" + name[len("torch"):]] for name in _NAMES}
    mods.update({name: sys.modules[oar_name] for name, oar_name in _QUANT.items()})
    return mods


class mock_torch:
    """Makes `import torch...` give oar until the block ends (or for good when called as a function)."""

    def __init__(self, enable=True):
        self.enable = enable
        self.saved = {}
        self.saved_attrs = []
        self.finder = None
        if enable:
            self._install()

    def _install(self):
        import oar.nn.functional, oar.nn.init, oar.nn.parameter, oar.nn.modules, oar.nn.utils  # noqa: F401,E401
        import oar.nn.modules.utils, oar.nn.modules.batchnorm, oar.nn.modules.instancenorm  # noqa: F401,E401
        import oar.nn.modules.lazy  # noqa: F401
        import oar.optim.lr_scheduler, oar.utils.data  # noqa: F401,E401
        import oar.distributed, oar.distributed.algorithms, oar.nn.parallel, oar.utils.data_distributed  # noqa: F401,E401
        import oar.distributed.optim, oar.futures  # noqa: F401,E401
        import oar.distributed.algorithms.ddp_comm_hooks.default_hooks  # noqa: F401
        import oar.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook  # noqa: F401
        import oar.distributed.algorithms.ddp_comm_hooks.powerSGD_hook  # noqa: F401
        import oar.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook  # noqa: F401
        import oar.distributed.algorithms.model_averaging.averagers  # noqa: F401
        from . import _C, _compat

        mods = _oar_modules()
        mods.update(_compat.modules())
        for name, mod in mods.items():
            self.saved[name] = sys.modules.get(name)
            sys.modules[name] = mod
        for owner, attr, name in _ATTRS:
            self._set(sys.modules[owner], attr, mods[name])
        for attr, fn in _compat.C_HOOKS.items():
            self._set(_C, attr, fn)
        from ._compat import extensions

        self._set(sys.modules["oar"], "classes", extensions.classes)
        self.saved["torch.classes"] = sys.modules.get("torch.classes")
        sys.modules["torch.classes"] = extensions.classes
        if extensions.finder not in sys.meta_path:  # libtorch's pybind11 modules import as absent ones
            sys.meta_path.insert(0, extensions.finder)
            self.finder = extensions.finder

    def _set(self, obj, attr, value):
        self.saved_attrs.append((obj, attr, getattr(obj, attr, _MISSING)))
        setattr(obj, attr, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for name, mod in self.saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
        for obj, attr, value in reversed(self.saved_attrs):
            if value is _MISSING:
                delattr(obj, attr)
            else:
                setattr(obj, attr, value)
        if self.finder is not None and self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        self.saved, self.saved_attrs, self.finder = {}, [], None
        return False


_MISSING = object()
