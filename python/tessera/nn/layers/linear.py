"""Identity, Linear and Bilinear layers."""

import math
from typing import Any, Optional

import tessera.core as mx
from tessera.nn.layers.base import Module


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __call__(self, x):
        return x


def _check_dims(layer, **dims):
    """Input sizes must be positive ints, output sizes non-negative ones."""
    for name, d in dims.items():
        least = 0 if name == "output_dims" else 1
        if not isinstance(d, int) or isinstance(d, bool) or d < least:
            raise ValueError(f"[{layer}] {name} must be an int of at least {least}, got {d!r}")


class Linear(Module):
    r"""``y = x @ weight.T + bias`` with ``weight (out, in)`` and ``bias (out,)``,
    both drawn from U(±1/sqrt(input_dims))."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True) -> None:
        super().__init__()
        _check_dims("Linear", input_dims=input_dims, output_dims=output_dims)
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))
        if bias:
            self.bias = mx.random.uniform(low=-scale, high=scale, shape=(output_dims,))

    def _extra_repr(self) -> str:
        return (f"input_dims={self.weight.shape[1]}, output_dims={self.weight.shape[0]}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    def to_quantized(self, group_size: Optional[int] = None, bits: Optional[int] = None,
                     mode: str = "affine", quantize_input: bool = False) -> Module:
        """The :class:`QuantizedLinear` with this layer's weight and bias, or with
        ``quantize_input`` (modes 'nvfp4' and 'mxfp8') the :class:`QQLinear`."""
        from tessera.nn.layers.quantized import QQLinear, QuantizedLinear
        if quantize_input:
            if mode not in ("nvfp4", "mxfp8"):
                raise ValueError("[Linear.to_quantized] quantize_input needs mode 'nvfp4' or "
                                 f"'mxfp8', got {mode!r}")
            return QQLinear.from_linear(self, group_size, bits, mode)
        return QuantizedLinear.from_linear(self, group_size, bits, mode)


class Bilinear(Module):
    r"""``y_k = x1^T W_k x2 + b_k`` with ``weight (out, in2, in1)``, U(±1/sqrt(in1))."""

    def __init__(self, input1_dims: int, input2_dims: int, output_dims: int,
                 bias: bool = True) -> None:
        super().__init__()
        _check_dims("Bilinear", input1_dims=input1_dims, input2_dims=input2_dims,
                    output_dims=output_dims)
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = mx.random.uniform(low=-scale, high=scale, shape=(output_dims,))

    def _extra_repr(self) -> str:
        out, in2, in1 = self.weight.shape
        return (f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, "
                f"bias={'bias' in self}")

    def __call__(self, x1, x2):
        out, in2, in1 = self.weight.shape
        xshape = x1.shape[:-1]
        x1 = mx.reshape(x1, (-1, in1))
        x2 = mx.reshape(x2, (-1, 1, in2))
        w = mx.reshape(self.weight, (out * in2, in1))
        y = x1 @ w.T
        y = mx.swapaxes(mx.reshape(y, (-1, out, in2)), -2, -1)
        y = x2 @ y
        y = mx.squeeze(y, 1)
        y = mx.reshape(y, tuple(xshape) + (out,))
        if "bias" in self:
            y = y + self.bias
        return y
