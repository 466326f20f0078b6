from . import lr_scheduler, swa_utils  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .sparse_adam import SparseAdam  # noqa: F401
from .optimizer import (ASGD, LAMB, SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, Optimizer,  # noqa: F401
                        RAdam, RMSprop, Rprop)
