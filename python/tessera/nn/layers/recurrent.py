"""Recurrent layers: RNN, GRU, LSTM (inputs ``(N, L, D)`` or ``(L, D)``)."""

import math
from typing import Callable, Optional

import tessera.core as mx
from tessera.nn.layers.base import Module


def _uniform(scale, shape):
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


def _gate_weights(gates, input_size, hidden_size):
    """The bound 1/sqrt(hidden_size), then the input and the hidden weights of
    ``gates`` stacked gates, drawn uniformly within it in that order."""
    scale = 1.0 / math.sqrt(hidden_size)
    return (scale, _uniform(scale, (gates * hidden_size, input_size)),
            _uniform(scale, (gates * hidden_size, hidden_size)))


class RNN(Module):
    """Elman RNN: ``h_t = f(x_t Wxh^T + b + h_{t-1} Whh^T)`` (``f`` default tanh)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: Optional[Callable] = None):
        super().__init__()
        self.nonlinearity = nonlinearity or mx.tanh
        if not callable(self.nonlinearity):
            raise ValueError(f"[RNN] nonlinearity must be callable, got {nonlinearity!r}")
        self.hidden_size = hidden_size
        scale, self.Wxh, self.Whh = _gate_weights(1, input_size, hidden_size)
        if bias:
            self.bias = _uniform(scale, (hidden_size,))

    def _extra_repr(self):
        return (f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
                f"nonlinearity={self.nonlinearity}, bias={'bias' in self}")

    def __call__(self, x, hidden=None):
        if "bias" in self:
            x = mx.addmm(self.bias, x, self.Wxh.T)
        else:
            x = x @ self.Wxh.T
        all_hidden = []
        for idx in range(x.shape[-2]):
            if hidden is not None:
                hidden = mx.addmm(x[..., idx, :], hidden, self.Whh.T)
            else:
                hidden = x[..., idx, :]
            hidden = self.nonlinearity(hidden)
            all_hidden.append(hidden)
        return mx.stack(all_hidden, axis=-2)


class _Gated(Module):
    """GRU and LSTM: ``_gates`` gates stacked in Wx and Wh; ``_bound`` bounds
    the uniform initial values, and ``_bias`` names the bias in the repr."""

    _gates = 1
    _bias = "bias"

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self._bound, self.Wx, self.Wh = _gate_weights(self._gates, input_size, hidden_size)

    def _extra_repr(self):
        return (f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
                f"bias={self._bias in self}")


class GRU(_Gated):
    """Gated recurrent unit; gates in order r, z, n."""

    _gates = 3
    _bias = "b"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__(input_size, hidden_size)
        if bias:
            self.b = _uniform(self._bound, (3 * hidden_size,))
            self.bhn = _uniform(self._bound, (hidden_size,))

    def __call__(self, x, hidden=None):
        H = self.hidden_size
        if "b" in self:
            x = mx.addmm(self.b, x, self.Wx.T)
        else:
            x = x @ self.Wx.T
        x_rz = x[..., :-H]
        x_n = x[..., -H:]
        all_hidden = []
        for idx in range(x.shape[-2]):
            rz = x_rz[..., idx, :]
            if hidden is not None:
                h_proj = hidden @ self.Wh.T
                h_proj_rz = h_proj[..., :-H]
                h_proj_n = h_proj[..., -H:]
                if "bhn" in self:
                    h_proj_n = h_proj_n + self.bhn
                rz = rz + h_proj_rz
            rz = mx.sigmoid(rz)
            r, z = rz[..., :H], rz[..., H:]
            n = x_n[..., idx, :]
            if hidden is not None:
                n = n + r * h_proj_n
            elif "bhn" in self:
                # No hidden state means h = 0, whose projection is just bhn.
                n = n + r * self.bhn
            n = mx.tanh(n)
            if hidden is not None:
                hidden = (1 - z) * n + z * hidden
            else:
                hidden = (1 - z) * n
            all_hidden.append(hidden)
        return mx.stack(all_hidden, axis=-2)


class LSTM(_Gated):
    """Long short-term memory; gates in order i, f, g, o. Returns
    ``(all_hidden, all_cell)``."""

    _gates = 4

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__(input_size, hidden_size)
        if bias:
            self.bias = _uniform(self._bound, (4 * hidden_size,))

    def __call__(self, x, hidden=None, cell=None):
        H = self.hidden_size
        if "bias" in self:
            x = mx.addmm(self.bias, x, self.Wx.T)
        else:
            x = x @ self.Wx.T
        all_hidden = []
        all_cell = []
        for idx in range(x.shape[-2]):
            ifgo = x[..., idx, :]
            if hidden is not None:
                ifgo = mx.addmm(ifgo, hidden, self.Wh.T)
            i = mx.sigmoid(ifgo[..., :H])
            f = mx.sigmoid(ifgo[..., H:2 * H])
            g = mx.tanh(ifgo[..., 2 * H:3 * H])
            o = mx.sigmoid(ifgo[..., 3 * H:])
            if cell is not None:
                cell = f * cell + i * g
            else:
                cell = i * g
            hidden = o * mx.tanh(cell)
            all_cell.append(cell)
            all_hidden.append(hidden)
        return mx.stack(all_hidden, axis=-2), mx.stack(all_cell, axis=-2)
