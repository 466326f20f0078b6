"""torch.nn.modules.lazy: modules whose parameters take their shapes from the first input."""
from ..parameter import UninitializedTensorMixin


class LazyModuleMixin:
    """Mixed in before Module: the first call runs initialize_parameters(*inputs) (which must
    materialize every uninitialized parameter and buffer), then the module behaves as
    cls_to_become (when set) or as itself."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(LazyModuleMixin._infer_parameters)

    def has_uninitialized_params(self):
        tensors = list(self._parameters.values()) + list(self._buffers.values())
        return any(isinstance(t, UninitializedTensorMixin) for t in tensors if t is not None)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    @staticmethod
    def _infer_parameters(module, args):
        module.initialize_parameters(*args)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
