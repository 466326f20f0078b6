"""torch.nn.utils.convert_parameters (the module name torch code imports them from)."""
from . import parameters_to_vector, vector_to_parameters  # noqa: F401
