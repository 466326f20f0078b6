"""oar.nn: modules, layers, functional, init, with torch.nn's names."""
from . import functional, init, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules.module import Module  # noqa: F401
from .parameter import Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401
from .graph import Graph  # noqa: F401
from . import modules  # noqa: F401
from . import parameter  # noqa: F401
from .parallel import DataParallel, SyncBatchNorm  # noqa: F401  (and oar.nn.parallel)
