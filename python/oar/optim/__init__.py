from . import lr_scheduler  # noqa: F401
from .optimizer import LAMB, SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop  # noqa: F401
