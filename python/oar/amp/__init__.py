"""oar.amp (torch.amp): autocast; GradScaler under the name later torch versions give it too."""
from .autocast_mode import autocast  # noqa: F401
from .grad_scaler import GradScaler  # noqa: F401
from . import cuda  # noqa: F401  (oar.cuda.amp)
