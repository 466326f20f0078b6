"""oar.amp (torch.amp and paddle.amp): autocast and auto_cast, decorate (O2: low-precision
parameters with f32 masters), and GradScaler with both torch's and Paddle's names."""
from .autocast_mode import autocast  # noqa: F401
from .auto_cast import amp_guard, auto_cast  # noqa: F401
from .decorate import decorate, master_params  # noqa: F401
from .grad_scaler import GradScaler  # noqa: F401
from . import cuda  # noqa: F401  (oar.cuda.amp)
