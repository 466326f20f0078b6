from .module import Module  # noqa: F401
from .layers import *  # noqa: F401,F403
from .rnn import GRU, LSTM, RNN, RNNBase, GRUCell, LSTMCell, RNNCell, RNNCellBase  # noqa: F401
from .transformer import (MultiheadAttention, Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                          TransformerEncoder, TransformerEncoderLayer)
from .activation_shape import *  # noqa: F401,F403
from .loss_more import *  # noqa: F401,F403
from .containers_param import *  # noqa: F401,F403
from .lazy_layers import *  # noqa: F401,F403
from .fractional_pool import *  # noqa: F401,F403
from .adaptive_softmax import *  # noqa: F401,F403
