"""oar.nn.Graph: OneFlow's way to compile. Subclass it, assign the modules it uses as
attributes, add the optimizer, write build(); calling the graph runs build compiled (one
program per input signature, training step included when build calls backward and step)."""
from .. import jit
from .modules.module import Module


class Graph:
    def __init__(self):
        self._optimizers = []
        self._lr_schedulers = []
        self._static = None

    def add_optimizer(self, optimizer, *, lr_sch=None):
        """The optimizer build() steps (its hyper-parameters are refreshed before every run); an
        lr scheduler given here is stepped after every call, as OneFlow does."""
        self._optimizers.append(optimizer)
        if lr_sch is not None:
            self._lr_schedulers.append(lr_sch)

    def build(self, *args):
        raise NotImplementedError("nn.Graph: define build(self, ...) with the computation to compile")

    def _modules(self):
        return [v for v in vars(self).values() if isinstance(v, Module)]

    def __call__(self, *args):
        if self._static is None:
            self._static = jit.StaticFunction(self.build, None, self._modules())
            self._static._optimizers.extend(self._optimizers)
        out = self._static(*args)
        for s in self._lr_schedulers:
            s.step()
        return out

    def num_traces(self):
        return self._static.num_traces() if self._static else 0

    def save(self, path):
        """The latest program as oar's model files (an inference graph: build without a step)."""
        if self._static is None:
            raise RuntimeError("nn.Graph: call the graph once before saving it")
        self._static.save(path)
