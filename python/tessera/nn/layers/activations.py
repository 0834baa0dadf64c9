"""Activation functions and their Module classes."""

import functools
import math

import tessera.core as mx
from tessera.nn.layers.base import Module


def _fused(f):
    """f compiled for every shape: where the backend fuses elementwise ops its
    ops run as one kernel (as MLX compiles its activations)."""
    return mx.compile(f, shapeless=True)


def sigmoid(x):
    r"""Elementwise :math:`1 / (1 + e^{-x})`."""
    return mx.sigmoid(x)


def relu(x):
    """Elementwise ``max(x, 0)``."""
    return mx.maximum(x, 0)


@_fused
def relu2(x):
    """Elementwise ``max(x, 0) ** 2``."""
    return mx.square(mx.maximum(x, 0))


@_fused
def relu6(x):
    """Elementwise ``min(max(x, 0), 6)``."""
    return mx.minimum(mx.maximum(x, 0), 6.0)


def leaky_relu(x, negative_slope=0.01):
    """Elementwise ``max(negative_slope * x, x)``."""
    return mx.maximum(negative_slope * x, x)


def log_softmax(x, axis=-1):
    """``x - logsumexp(x, axis)``."""
    return x - mx.logsumexp(x, axis=axis, keepdims=True)


def elu(x, alpha=1.0):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return mx.where(x > 0, x, alpha * (mx.exp(mx.minimum(x, 0)) - 1))


def softmax(x, axis=-1):
    """Softmax over ``axis``."""
    return mx.softmax(x, axis=axis)


def softplus(x):
    """``log(1 + exp(x))``, as ``logaddexp(x, 0)``."""
    return mx.logaddexp(x, 0)


@_fused
def softsign(x):
    """``x / (1 + |x|)``."""
    return mx.divide(x, 1 + mx.abs(x))


def softshrink(x, lambd: float = 0.5):
    """``x - sign(x) * lambd`` where ``|x| > lambd``, else 0."""
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


def celu(x, alpha=1.0):
    """``max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)``."""
    return mx.maximum(x, 0.0) + alpha * (mx.exp(mx.minimum(x, 0.0) / alpha) - 1)


@_fused
def silu(x):
    """``x * sigmoid(x)``."""
    return x * mx.sigmoid(x)


@_fused
def log_sigmoid(x):
    """``-softplus(-x)``."""
    return -softplus(-x)


@_fused
def gelu(x):
    """``x * (1 + erf(x / sqrt(2))) / 2``."""
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2


@_fused
def gelu_approx(x):
    """``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``."""
    return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@_fused
def gelu_fast_approx(x):
    """``x * sigmoid(1.702 * x)``."""
    return x * mx.sigmoid(1.702 * x)


def glu(x, axis: int = -1):
    """Splits ``x`` in halves ``a, b`` along ``axis``; ``a * sigmoid(b)``."""
    a, b = mx.split(x, indices_or_sections=2, axis=axis)
    return a * mx.sigmoid(b)


def step(x, threshold: float = 0.0):
    """1 where ``x >= threshold`` else 0 (in ``x``'s dtype)."""
    return mx.where(x >= threshold, 1, 0).astype(x.dtype)


@_fused
def selu(x):
    """``1.0507 * elu(x, 1.67326)``."""
    return elu(x, 1.67326) * 1.0507


def prelu(x, alpha):
    """``max(0, x) + alpha * min(0, x)``."""
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


@_fused
def mish(x):
    """``x * tanh(softplus(x))``."""
    return x * mx.tanh(softplus(x))


@_fused
def hardswish(x):
    """``x * min(max(x + 3, 0), 6) / 6``."""
    max_x_3 = mx.maximum(x + 3, 0)
    return x * mx.minimum(max_x_3, 6) / 6


def hard_tanh(x, min_val=-1.0, max_val=1.0):
    """Clamps ``x`` to ``[min_val, max_val]``."""
    return mx.minimum(mx.maximum(x, min_val), max_val)


def hard_shrink(x, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    return mx.where(mx.abs(x) > lambd, x, 0)


def softmin(x, axis=-1):
    """``softmax(-x, axis)``."""
    return mx.softmax(-x, axis=axis)


def tanh(x):
    """Elementwise hyperbolic tangent."""
    return mx.tanh(x)


class GLU(Module):
    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return glu(x=x, axis=self.axis)


def _make_activation_module(f, name):
    def __call__(self, x):
        return f(x)

    return type(name, (Module,), {"__call__": __call__, "__doc__": f.__doc__})


Sigmoid = _make_activation_module(sigmoid, "Sigmoid")
Mish = _make_activation_module(mish, "Mish")
ReLU = _make_activation_module(relu, "ReLU")
ReLU2 = _make_activation_module(relu2, "ReLU2")
ReLU6 = _make_activation_module(relu6, "ReLU6")
Softmax = _make_activation_module(softmax, "Softmax")
Softplus = _make_activation_module(softplus, "Softplus")
Softsign = _make_activation_module(softsign, "Softsign")
SiLU = _make_activation_module(silu, "SiLU")
LogSigmoid = _make_activation_module(log_sigmoid, "LogSigmoid")
SELU = _make_activation_module(selu, "SELU")
Hardswish = _make_activation_module(hardswish, "Hardswish")
Tanh = _make_activation_module(tanh, "Tanh")
Softmin = _make_activation_module(softmin, "Softmin")
LogSoftmax = _make_activation_module(log_softmax, "LogSoftmax")


def _with_parameters(fn, parameters, x):
    return fn(x, *parameters)


class _Parametric(Module):
    """An activation with fixed parameters: ``fn(x, *parameters)``."""

    def __init__(self, fn, *parameters):
        super().__init__()
        # An attribute, not an entry of the module's tree (which a tuple would be).
        self._act = functools.partial(_with_parameters, fn, parameters)

    def __call__(self, x):
        return self._act(x)


class LeakyReLU(_Parametric):
    def __init__(self, negative_slope=1e-2):
        super().__init__(leaky_relu, negative_slope)


class ELU(_Parametric):
    def __init__(self, alpha=1.0):
        super().__init__(elu, alpha)


class CELU(_Parametric):
    def __init__(self, alpha=1.0):
        super().__init__(celu, alpha)


class Softshrink(_Parametric):
    def __init__(self, lambd=0.5):
        super().__init__(softshrink, lambd)


class HardShrink(_Parametric):
    def __init__(self, lambd=0.5):
        super().__init__(hard_shrink, lambd)


class HardTanh(_Parametric):
    def __init__(self, min_val=-1.0, max_val=1.0):
        super().__init__(hard_tanh, min_val, max_val)


class Step(_Parametric):
    def __init__(self, threshold: float = 0.0):
        super().__init__(step, threshold)


class PReLU(Module):
    """Learnable ``weight`` of shape ``(num_parameters,)``."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x):
        return prelu(x, self.weight)


class GELU(Module):
    """GELU with ``approx`` in ``'none'``, ``'precise'``/``'tanh'``, ``'fast'``."""

    def __init__(self, approx="none"):
        super().__init__()
        self._approx = approx
        allowed = ["none", "precise", "tanh", "fast"]
        if approx not in allowed:
            raise ValueError(f"[GELU] the approximation should be in {allowed} "
                             f"but {approx!r} was given")
        if approx == "none":
            self._act = gelu
        elif approx in ("precise", "tanh"):
            self._act = gelu_approx
        else:
            self._act = gelu_fast_approx

    def __call__(self, x):
        return self._act(x)
