"""oar.cpu (torch.cpu): its amp namespace."""
from . import amp  # noqa: F401
