"""torch.version: the oar build stands for torch's version fields (no CUDA from Python)."""
from .. import _C

__version__ = _C.version
cuda = None
hip = None
debug = False
git_version = "oar"
