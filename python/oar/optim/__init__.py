from . import lr_scheduler  # noqa: F401
from .optimizer import (ASGD, LAMB, SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, Optimizer,  # noqa: F401
                        RAdam, RMSprop, Rprop)
