"""torch.nn.quantized.dynamic LSTM and GRU (and LSTMCell, GRUCell, RNNCell): qint8 weights
quantized once by the qconfig's weight observer (per tensor by default, as torch's), float32
activations quantized to u8 over their own range at every product, int32 sums, float32 biases
and nonlinearities. A whole layer runs the C core's dynamically quantized layer
(_C.rnn_qlayer, src/nn/rnn_qlayer.c: the input projection of every step at once, as torch's CPU
layer computes it); packed sequences (their input projected at once too) and the cells step in
Python over the same int8 products (dynamic.linear), as torch steps them. Inference only."""
from .... import _C
from .... import _creation as C
from .... import _dtype as D
from .... import _qtensor as Q
from ....nn.modules import rnn as R
from ....nn.modules.module import Module
from . import _state as S
from . import modules as nnq


def _dynamic_affine(x, h, w_ih, w_hh, b_ih, b_hh):
    """the int8 products; w_ih None: x is already the input's product (a layer projects all its steps at once)"""
    from .dynamic import linear

    a = x if w_ih is None else linear(x, w_ih, b_ih, what="dynamic quantized RNN")
    return a, linear(h, w_hh, b_hh, what="dynamic quantized RNN")


def _qint8_only(dtype, who):
    if dtype is not Q.qint8:
        raise NotImplementedError(f"{who}: dtype {dtype!r} is not offered; oar quantizes recurrent layers dynamically "
                                  "to torch.qint8")


class _Dynamic:
    """what the dynamic layers and cells share: torch's names, the int8 products, from_float's checks"""

    _affine = staticmethod(_dynamic_affine)

    def _get_name(self):
        return "DynamicQuantized" + type(self).__name__

    @classmethod
    def _weight_observer(cls, mod, float_base):
        """the qconfig's weight observer (torch's default dynamic one without a qconfig), checked to be qint8"""
        if type(mod).__name__ != cls.__name__ or not isinstance(mod, float_base):
            raise TypeError(f"nn.quantized.dynamic.{cls.__name__}.from_float: expected nn.{cls.__name__}, got "
                            f"{type(mod).__name__}")
        qconfig = getattr(mod, "qconfig", None)
        if qconfig is None or qconfig.weight is None:
            from ...quantization.qconfig import default_dynamic_qconfig

            qconfig = default_dynamic_qconfig
        _qint8_only(qconfig.weight().dtype, f"quantize_dynamic ({cls.__name__})")
        return qconfig.weight


def _quantized(observer, w, b):
    """(qint8 weight, float32 bias or None): each weight with its own observer, as torch's from_float"""
    return nnq._quantize_weight(w.detach(), observer()), None if b is None else b.detach().to(D.float32).clone()


def _empty_weight(rows, cols):
    return Q.quantize_per_tensor(C.zeros(rows, cols), 1.0, 0, Q.qint8)


def _load_packed(value, key, current, names, error_msgs):
    """a checkpoint's packed tuple (weights then biases, as `names`) checked against current, or current kept"""
    if value is S._MISSING:
        return current
    if not isinstance(value, (tuple, list)) or len(value) != len(current):
        error_msgs.append(f'While copying the parameter named "{key}", expected a tuple ({", ".join(names)}) from '
                          f"checkpoint but received {type(value).__name__}"
                          + (f" of {len(value)} items" if isinstance(value, (tuple, list)) else "") + ".")
        return current
    n_w = len(names) // 2
    out, ok = [], True
    for i, (v, cur, name) in enumerate(zip(value, current, names)):
        what = f"{key}[{i}] ({name})"
        if i < n_w:
            w = S.qweight(v, what, cur.shape, error_msgs)
            ok &= w is not None
            out.append(w)
        else:
            good, b = S.bias(v, what, current[i - n_w].shape[0], error_msgs)
            ok &= good
            out.append(b)
    return tuple(out) if ok else current


class _DynamicRNNBase(_Dynamic, R.RNNBase):
    """the float layer's forward (layers, directions, batch_first, packed sequences) on int8 weights"""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=Q.qint8):
        Module.__init__(self)
        _qint8_only(dtype, self._get_name())
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.bidirectional = bias, batch_first, bidirectional
        self.dropout, self.nonlinearity, self.dtype = float(dropout), "tanh", dtype
        g, dirs = self._gates * hidden_size, 2 if bidirectional else 1
        # torch's name: per layer and direction, (weight_ih, weight_hh, bias_ih, bias_hh)
        self._all_weight_values = [
            (_empty_weight(g, input_size if layer == 0 else hidden_size * dirs), _empty_weight(g, hidden_size),
             C.zeros(g) if bias else None, C.zeros(g) if bias else None)
            for layer in range(num_layers) for _ in range(dirs)]

    def _layer_weights(self, layer, direction):
        return self._all_weight_values[layer * (2 if self.bidirectional else 1) + direction]

    def _layer(self, x, state, w, reverse):
        """one direction of one layer: the C core's quantized layer (a layer without bias adds zeros: exact)"""
        w_ih, w_hh, b_ih, b_hh = w
        if b_ih is None or b_hh is None:
            zeros = C.zeros(w_ih.shape[0])
            b_ih, b_hh = (zeros if b_ih is None else b_ih), (zeros if b_hh is None else b_hh)
        xs = x.flip([0]) if reverse else x
        h0, c0 = (None, None) if state is None else (state[0], state[1] if len(state) > 1 else None)
        y, h, c = _C.rnn_qlayer(self._c_cell, xs, w_ih.codes, w_ih._scale, w_hh.codes, w_hh._scale, b_ih, b_hh, h0,
                                c0)
        return (y.flip([0]) if reverse else y), ((h, c) if c is not None else (h,))

    def _packed_layer(self, data, sizes, starts, state, w, reverse):
        """a PackedSequence: the input's product over every row at once (quantized once, as torch's CPU layer
        does), then the steps, each quantizing the active rows' hidden state"""
        from .dynamic import linear

        w_ih, w_hh, b_ih, b_hh = w
        projected = linear(data, w_ih, b_ih, what="dynamic quantized RNN")
        return super()._packed_layer(projected, sizes, starts, state, (None, w_hh, None, b_hh), reverse)

    def get_weight(self):
        return self._by_name(("weight_ih", "weight_hh"), 0)

    def get_bias(self):
        return self._by_name(("bias_ih", "bias_hh"), 2)

    def _by_name(self, names, first):
        dirs, out = 2 if self.bidirectional else 1, {}
        for layer in range(self.num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                values = self._layer_weights(layer, d)
                for k, name in enumerate(names):
                    out[name + sfx] = values[first + k]
        return out

    # torch's keys: _all_weight_values.<i>.param, one per layer and direction (torch's are packed objects; oar's
    # hold the same four values as a tuple)
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for i, values in enumerate(self._all_weight_values):
            destination[f"{prefix}_all_weight_values.{i}.param"] = values

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        self._all_weight_values = [
            _load_packed(S.take(state_dict, key, missing_keys), key, current, names, error_msgs)
            for key, current in ((f"{prefix}_all_weight_values.{i}.param", cur)
                                 for i, cur in enumerate(self._all_weight_values))]
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    @classmethod
    def from_float(cls, mod):
        observer = cls._weight_observer(mod, R.RNNBase)
        q = cls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first, mod.dropout,
                mod.bidirectional)
        dirs = 2 if mod.bidirectional else 1
        q._all_weight_values = []
        for layer in range(mod.num_layers):
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = mod._layer_weights(layer, d)
                (qw_ih, qb_ih), (qw_hh, qb_hh) = _quantized(observer, w_ih, b_ih), _quantized(observer, w_hh, b_hh)
                q._all_weight_values.append((qw_ih, qw_hh, qb_ih, qb_hh))
        q.training = False
        return q

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class LSTM(_DynamicRNNBase):
    _gates, _n_states, _c_cell = 4, 2, True
    _cell = R.LSTM._cell


class GRU(_DynamicRNNBase):
    _gates, _n_states, _c_cell = 3, 1, False
    _cell = R.GRU._cell


class _DynamicCellBase(_Dynamic, R.RNNCellBase):
    """one step of the float cell on int8 products: x and h each quantized over their own range"""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=Q.qint8):
        Module.__init__(self)
        _qint8_only(dtype, self._get_name())
        self.input_size, self.hidden_size, self.bias, self.nonlinearity = input_size, hidden_size, bias, nonlinearity
        g = self._layer_cls._gates * hidden_size
        self.weight_ih, self.weight_hh = _empty_weight(g, input_size), _empty_weight(g, hidden_size)
        self.bias_ih, self.bias_hh = (C.zeros(g), C.zeros(g)) if bias else (None, None)

    # torch's keys: _packed_weight_ih and _packed_weight_hh (torch's are packed objects holding weight and bias;
    # oar's are (weight, bias) tuples)
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "_packed_weight_ih"] = (self.weight_ih, self.bias_ih)
        destination[prefix + "_packed_weight_hh"] = (self.weight_hh, self.bias_hh)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        for part in ("ih", "hh"):
            key = f"{prefix}_packed_weight_{part}"
            current = (getattr(self, "weight_" + part), getattr(self, "bias_" + part))
            w, b = _load_packed(S.take(state_dict, key, missing_keys), key, current,
                                ("weight_" + part, "bias_" + part), error_msgs)
            setattr(self, "weight_" + part, w)
            setattr(self, "bias_" + part, b)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    @classmethod
    def from_float(cls, mod):
        observer = cls._weight_observer(mod, R.RNNCellBase)
        q = cls(mod.input_size, mod.hidden_size, mod.bias, mod.nonlinearity)
        q.weight_ih, q.bias_ih = _quantized(observer, mod.weight_ih, mod.bias_ih)
        q.weight_hh, q.bias_hh = _quantized(observer, mod.weight_hh, mod.bias_hh)
        q.training = False
        return q


class LSTMCell(_DynamicCellBase):
    _layer_cls = R.LSTM


class GRUCell(_DynamicCellBase):
    _layer_cls = R.GRU


class RNNCell(_DynamicCellBase):
    _layer_cls = R.RNN
