"""Running unmodified PyTorch code on oar: `import torch` (and torch.nn, torch.nn.functional,
torch.optim, torch.utils.data, torch.autograd) resolve to oar's modules.

    with oar.mock_torch():       # only inside the block (previous modules restored after)
        import model_file
    oar.mock_torch(enable=True)  # from now on (or OAR_MOCK_TORCH=1 with `import oar` first,
                                 #  or `python -m oar.mock script.py`)
"""
import sys

_NAMES = ("torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.parameter", "torch.nn.modules",
          "torch.optim", "torch.optim.lr_scheduler", "torch.utils", "torch.utils.data", "torch.autograd")


def _oar_modules():
    import oar

    return {name: sys.modules["oar" + name[len("torch"):]] for name in _NAMES}


class mock_torch:
    """Makes `import torch...` give oar until the block ends (or for good when called as a function)."""

    def __init__(self, enable=True):
        self.enable = enable
        self.saved = {}
        if enable:
            self._install()

    def _install(self):
        import oar.nn.functional, oar.nn.init, oar.nn.parameter, oar.nn.modules  # noqa: F401,E401
        import oar.optim.lr_scheduler, oar.utils.data  # noqa: F401,E401

        mods = _oar_modules()
        for name, mod in mods.items():
            self.saved[name] = sys.modules.get(name)
            sys.modules[name] = mod

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for name, mod in self.saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
        self.saved = {}
        return False
