from .module import Module  # noqa: F401
from .layers import *  # noqa: F401,F403
