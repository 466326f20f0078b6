"""Recurrent layers with torch's signatures, parameter names (weight_ih_l0, ..._reverse), gate
order (LSTM i, f, g, o; GRU r, z, n), initialisation and dropout between layers. LSTM and GRU
layers with biases run the C core's layer (_C.rnn_layer: the code of the C nn.LSTM/nn.GRU, so
a model written here computes what the C zoo's does); RNN and bias-free layers are composed
step by step from oar's ops. Autograd gives the gradients either way."""
import math

from ... import _C
from ... import _creation as C
from ... import _functions as F
from .. import functional as NF
from .. import init
from ..parameter import Parameter
from .module import Module


class RNNBase(Module):
    _gates = 1
    _c_cell = None  # True: the C core's LSTM layer, False: its GRU layer, None: composed here

    def flatten_parameters(self):
        """torch packs the weights into one cuDNN buffer here; oar's kernels read the parameters as
        they are, so there is nothing to pack."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, nonlinearity="tanh", device=None, dtype=None):
        super().__init__()
        if not (isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.bidirectional = bias, batch_first, bidirectional
        self.nonlinearity, self.dropout = nonlinearity, dropout
        dirs = 2 if bidirectional else 1
        g = self._gates * hidden_size
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                isz = input_size if layer == 0 else hidden_size * dirs
                setattr(self, "weight_ih" + sfx, Parameter(C.empty(g, isz)))
                setattr(self, "weight_hh" + sfx, Parameter(C.empty(g, hidden_size)))
                if bias:
                    setattr(self, "bias_ih" + sfx, Parameter(C.empty(g)))
                    setattr(self, "bias_hh" + sfx, Parameter(C.empty(g)))
        self.reset_parameters()

    def reset_parameters(self):
        std = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -std, std)

    def _cell(self, x, state, w_ih, w_hh, b_ih, b_hh):
        raise NotImplementedError

    def _layer_weights(self, layer, direction):
        """[weight_ih, weight_hh, bias_ih, bias_hh] of one layer and direction (biases None without bias)"""
        sfx = f"_l{layer}" + ("_reverse" if direction else "")
        return [getattr(self, k + sfx, None) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    @staticmethod
    def _affine(x, h, w_ih, w_hh, b_ih, b_hh):
        """the gates' input and recurrent products (the quantized layers put their int8 products here)"""
        return NF.linear(x, w_ih, b_ih), NF.linear(h, w_hh, b_hh)

    def forward(self, input, hx=None):
        from ..utils.rnn import PackedSequence

        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        seq, n = input.shape[0], input.shape[1]
        dirs = 2 if self.bidirectional else 1
        state0 = self._initial(hx, n, dirs, batched)
        finals = []
        layer_in = input
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w = self._layer_weights(layer, d)
                state = None if state0 is None else tuple(s[layer * dirs + d] for s in state0)
                y, state = self._layer(layer_in, state, w, reverse=bool(d))
                outs.append(y)
                finals.append(state)
            layer_in = outs[0] if dirs == 1 else F.cat(outs, 2)
            if self.dropout and self.training and layer + 1 < self.num_layers:
                layer_in = NF.dropout(layer_in, self.dropout, True)  # torch: between layers, not after the last
        out = layer_in
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        final = tuple(F.stack([f[k] for f in finals], 0) for k in range(len(finals[0])))
        if not batched:
            final = tuple(s.squeeze(1) for s in final)
        return out, (final if len(final) > 1 else final[0])

    def _layer(self, x, state, w, reverse):
        """One direction of one layer over x [T, N, I] -> (y [T, N, H], final state)."""
        if self._c_cell is not None and w[2] is not None:
            xs = x.flip([0]) if reverse else x
            h0, c0 = (None, None) if state is None else (state[0], state[1] if len(state) > 1 else None)
            y, h, c = _C.rnn_layer(self._c_cell, xs, *w, h0, c0)
            return (y.flip([0]) if reverse else y), ((h, c) if c is not None else (h,))
        if state is None:
            zero = C.zeros(x.shape[1], self.hidden_size, dtype=x.dtype, device=x.device)
            state = (zero,) * self._n_states
        ys = [None] * x.shape[0]
        for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
            state = self._cell(x[t], state, *w)
            ys[t] = state[0]
        return F.stack(ys, 0), state

    def _forward_packed(self, packed, hx):
        """A PackedSequence: each layer runs step by step on the batch's active prefix (the
        sequences are sorted by decreasing length), so every sequence ends at its own length."""
        from ..utils.rnn import PackedSequence

        sizes = [int(b) for b in packed.batch_sizes.tolist()]
        starts = [sum(sizes[:t]) for t in range(len(sizes))]
        dirs = 2 if self.bidirectional else 1
        state0 = self._initial(hx, sizes[0], dirs, True)
        if state0 is not None and packed.sorted_indices is not None:
            state0 = tuple(F.index_select(s, 1, packed.sorted_indices) for s in state0)
        finals, layer_in = [], packed.data
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w = self._layer_weights(layer, d)
                state = None if state0 is None else tuple(s[layer * dirs + d] for s in state0)
                y, state = self._packed_layer(layer_in, sizes, starts, state, w, reverse=bool(d))
                outs.append(y)
                finals.append(state)
            layer_in = outs[0] if dirs == 1 else F.cat(outs, 1)
            if self.dropout and self.training and layer + 1 < self.num_layers:
                layer_in = NF.dropout(layer_in, self.dropout, True)
        final = tuple(F.stack([f[k] for f in finals], 0) for k in range(len(finals[0])))
        if packed.unsorted_indices is not None:
            final = tuple(F.index_select(s, 1, packed.unsorted_indices) for s in final)
        out = PackedSequence(layer_in, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
        return out, (final if len(final) > 1 else final[0])

    def _packed_layer(self, data, sizes, starts, state, w, reverse):
        """One direction over packed rows: at step t the first sizes[t] sequences step; the others
        keep their state (a reverse pass starts each sequence at its own last step from state)."""
        n = sizes[0]
        if state is None:
            zero = C.zeros(n, self.hidden_size, dtype=data.dtype, device=data.device)
            state = (zero,) * self._n_states
        ys = [None] * len(sizes)
        for t in (range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))):
            b = sizes[t]
            new = self._cell(data[starts[t]:starts[t] + b], tuple(s[:b] for s in state), *w)
            state = tuple(F.cat([v, s[b:]], 0) if b < n else v for v, s in zip(new, state))
            ys[t] = new[0]
        return F.cat(ys, 0), state

    def _initial(self, hx, n, dirs, batched):
        if hx is None:
            return None  # zeros: the C layer skips the first step's recurrent products
        hx = hx if isinstance(hx, tuple) else (hx,)
        return tuple(h if batched else h.unsqueeze(1) for h in hx)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    _gates, _n_states = 1, 1

    def _cell(self, x, state, w_ih, w_hh, b_ih=None, b_hh=None):
        a, b = self._affine(x, state[0], w_ih, w_hh, b_ih, b_hh)
        return ((F.tanh if self.nonlinearity == "tanh" else F.relu)(a + b),)


class LSTM(RNNBase):
    _gates, _n_states, _c_cell = 4, 2, True

    def __init__(self, *args, **kwargs):
        kwargs.pop("proj_size", 0)
        super().__init__(*args, **kwargs)

    def _cell(self, x, state, w_ih, w_hh, b_ih=None, b_hh=None):
        h, c = state
        a, b = self._affine(x, h, w_ih, w_hh, b_ih, b_hh)
        i, f, g, o = (a + b).chunk(4, 1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        return F.sigmoid(o) * F.tanh(c), c


class GRU(RNNBase):
    _gates, _n_states, _c_cell = 3, 1, False

    def _cell(self, x, state, w_ih, w_hh, b_ih=None, b_hh=None):
        h = state[0]
        a, b = self._affine(x, h, w_ih, w_hh, b_ih, b_hh)
        ar, az, an = a.chunk(3, 1)
        br, bz, bn = b.chunk(3, 1)
        r, z = F.sigmoid(ar + br), F.sigmoid(az + bz)
        n = F.tanh(an + r * bn)
        return ((1 - z) * n + z * h,)


class RNNCellBase(Module):
    """One step of a recurrent layer (torch's RNNCell, LSTMCell, GRUCell): the layers' cell
    function on weight_ih, weight_hh, bias_ih, bias_hh, initialised as theirs."""

    _layer_cls = None
    _affine = RNNBase.__dict__["_affine"]  # the staticmethod itself

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__()
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.input_size, self.hidden_size, self.bias, self.nonlinearity = input_size, hidden_size, bias, nonlinearity
        g = self._layer_cls._gates * hidden_size
        self.weight_ih = Parameter(C.empty(g, input_size))
        self.weight_hh = Parameter(C.empty(g, hidden_size))
        self.bias_ih = Parameter(C.empty(g)) if bias else None
        self.bias_hh = Parameter(C.empty(g)) if bias else None
        RNNBase.reset_parameters(self)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        n_states = self._layer_cls._n_states
        if hx is None:
            zero = C.zeros(x.shape[0], self.hidden_size, dtype=input.dtype, device=input.device)
            state = (zero,) * n_states
        else:
            state = tuple(hx) if n_states > 1 else (hx,)
            state = state if batched else tuple(s.unsqueeze(0) for s in state)
        out = self._layer_cls._cell(self, x, state, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        out = out if batched else tuple(o.squeeze(0) for o in out)
        return out if n_states > 1 else out[0]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        return s + (", bias=False" if not self.bias else "") + \
            (f", nonlinearity={self.nonlinearity}" if self.nonlinearity != "tanh" else "")


class RNNCell(RNNCellBase):
    _layer_cls = RNN


class LSTMCell(RNNCellBase):
    _layer_cls = LSTM


class GRUCell(RNNCellBase):
    _layer_cls = GRU
