"""Quantized layers and ``nn.quantize``."""

import math
from typing import Callable, Optional

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.utils import tree_map_with_path

# group_size and bits when None, per mode.
_DEFAULTS = {"affine": (64, 4), "mxfp4": (32, 4), "nvfp4": (16, 4), "mxfp8": (32, 8)}


def _defaults_for_mode(mode, group_size, bits):
    if mode not in _DEFAULTS:
        raise ValueError(f"[quantize] unknown mode '{mode}' (expected one of "
                         f"{', '.join(repr(m) for m in _DEFAULTS)})")
    default_group_size, default_bits = _DEFAULTS[mode]
    return group_size or default_group_size, bits or default_bits


class _Quantized(Module):
    """What the quantized layers share: the packed ``weight``, its ``scales``
    and (affine mode) ``biases``, kept frozen."""

    def _set_quantized(self, weight):
        self.weight, self.scales, *biases = mx.quantize(weight, self.group_size, self.bits,
                                                        mode=self.mode)
        if biases:
            self.biases = biases[0]
        elif "biases" in self:
            del self["biases"]

    def _quantized_kwargs(self):
        return {"group_size": self.group_size, "bits": self.bits, "mode": self.mode}

    def unfreeze(self, *args, **kwargs):
        # The quantized parameters stay frozen.
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False)
        return self


class QuantizedLinear(_Quantized):
    """``y = x @ dequantize(weight).T + bias`` computed with ``quantized_matmul``;
    the whole module is frozen."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: Optional[int] = None, bits: Optional[int] = None,
                 mode: str = "affine") -> None:
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / input_dims)
        self._set_quantized(mx.random.uniform(low=-scale, high=scale,
                                              shape=(output_dims, input_dims)))
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        in_dims = in_dims * 32 // self.bits
        return (f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}, "
                f"group_size={self.group_size}, bits={self.bits}, mode={self.mode!r}")

    def __call__(self, x):
        # Called once per layer per decoding step: the arguments are passed as
        # they are, without building a dict of them each call.
        y = mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                biases=self.get("biases"), transpose=True,
                                group_size=self.group_size, bits=self.bits, mode=self.mode)
        if "bias" in self:
            y = y + self["bias"]
        return y

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: Optional[int] = None,
                    bits: Optional[int] = None, mode: str = "affine") -> "QuantizedLinear":
        """The quantized counterpart of a :class:`Linear` (its bias kept as is)."""
        output_dims, input_dims = linear_layer.weight.shape
        ql = cls(input_dims, output_dims, False, group_size, bits, mode=mode)
        ql._set_quantized(linear_layer.weight)
        if "bias" in linear_layer:
            ql.bias = linear_layer.bias
        ql.freeze()
        return ql


class QuantizedEmbedding(_Quantized):
    """An :class:`Embedding` whose table is quantized: a lookup dequantizes the
    selected rows; ``as_linear`` is a quantized matmul with the table."""

    def __init__(self, num_embeddings: int, dims: int, group_size: Optional[int] = None,
                 bits: Optional[int] = None, mode: str = "affine") -> None:
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        scale = math.sqrt(1 / dims)
        self._set_quantized(mx.random.normal(shape=(num_embeddings, dims), scale=scale))
        self.num_embeddings = num_embeddings
        self.dims = dims
        self.freeze()

    def _extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode!r}")

    def __call__(self, x):
        biases = self.get("biases")
        return mx.dequantize(self["weight"][x], scales=self["scales"][x],
                             biases=None if biases is None else biases[x],
                             **self._quantized_kwargs())

    def as_linear(self, x):
        """Tied output projection ``x @ dequantize(weight).T``."""
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                   biases=self.get("biases"), transpose=True,
                                   **self._quantized_kwargs())

    @classmethod
    def from_embedding(cls, embedding_layer: Module, group_size: Optional[int] = None,
                       bits: Optional[int] = None, mode: str = "affine") -> "QuantizedEmbedding":
        """The quantized counterpart of an :class:`Embedding`."""
        num_embeddings, dims = embedding_layer.weight.shape
        qe = cls(num_embeddings, dims, group_size, bits, mode=mode)
        qe._set_quantized(embedding_layer.weight)
        qe.freeze()
        return qe


class QQLinear(Module):
    """``y = x @ w.T`` with the input, and the weight, quantized in mode ``'nvfp4'``,
    ``'mxfp8'`` or ``'mxfp4'`` by ``mx.qqmm``; no bias.

    In training mode the weight is kept in floating point (and quantized on the fly,
    so it receives gradients); in eval mode it is stored quantized with its ``scales``.
    ``train()`` / ``eval()`` switch between the two (``dequantize()`` / ``quantize()``)."""

    def __init__(self, input_dims: int, output_dims: int, group_size: Optional[int] = None,
                 bits: Optional[int] = None, mode: str = "nvfp4") -> None:
        if mode == "affine":
            raise ValueError("[QQLinear] mode 'affine' is not supported (expected 'nvfp4', "
                             "'mxfp8' or 'mxfp4')")
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        super().__init__()
        scale = math.sqrt(1 / input_dims)
        self.weight = mx.random.uniform(low=-scale, high=scale, shape=(output_dims, input_dims))

    @property
    def _training(self):
        return self.__dict__.get("_training_flag", True)

    @_training.setter
    def _training(self, mode):
        # train() and eval() set this flag: the weight follows it.
        self.__dict__["_training_flag"] = mode
        if "weight" in self:
            self.dequantize() if mode else self.quantize()

    @property
    def _quantized(self):
        return "scales" in self

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        if self.weight.dtype == mx.uint32:
            in_dims = in_dims * 32 // self.bits
        return (f"input_dims={in_dims}, output_dims={out_dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode!r}")

    def quantize(self):
        """Stores the weight quantized, with its ``scales``."""
        if not self._quantized:
            self.weight, self.scales = mx.quantize(self.weight, self.group_size, self.bits,
                                                   mode=self.mode)

    def dequantize(self):
        """Stores the weight in floating point again (the quantized values)."""
        if self._quantized:
            self.weight = mx.dequantize(self.weight, scales=self.scales,
                                        group_size=self.group_size, bits=self.bits,
                                        mode=self.mode)
            del self["scales"]

    def __call__(self, x):
        return mx.qqmm(x, self["weight"], scales=self.get("scales"), group_size=self.group_size,
                       bits=self.bits, mode=self.mode)

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: Optional[int] = None,
                    bits: Optional[int] = None, mode: str = "nvfp4") -> "QQLinear":
        """The :class:`QQLinear` with a bias-free :class:`Linear`'s weight, in its mode."""
        if "bias" in linear_layer:
            raise ValueError("[QQLinear.from_linear] QQLinear has no bias; the Linear has one")
        output_dims, input_dims = linear_layer.weight.shape
        ql = cls(input_dims, output_dims, group_size, bits, mode=mode)
        ql.weight = linear_layer.weight
        ql.train(linear_layer.training)
        return ql


def quantize(model: Module, group_size: Optional[int] = None, bits: Optional[int] = None, *,
             mode: str = "affine", quantize_input: bool = False,
             class_predicate: Optional[Callable[[str, Module], object]] = None) -> None:
    """Replaces, in place, every leaf module with a ``to_quantized`` method for
    which ``class_predicate(path, module)`` is truthy by ``module.to_quantized(...)``.
    The predicate may return a dict of ``to_quantized`` keyword arguments."""
    class_predicate = class_predicate or (lambda _, m: hasattr(m, "to_quantized"))

    def maybe_quantize(path, m):
        wanted = class_predicate(path, m)
        if not wanted:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(f"[quantize] unable to quantize a module of type {type(m).__name__}")
        if isinstance(wanted, bool):
            kwargs = {"group_size": group_size, "bits": bits, "mode": mode,
                      "quantize_input": quantize_input}
        elif isinstance(wanted, dict):
            kwargs = wanted
        else:
            raise ValueError("[quantize] class_predicate must return a bool or a dict of "
                             f"to_quantized parameters, got {type(wanted).__name__}")
        return m.to_quantized(**kwargs)

    leaves = tree_map_with_path(maybe_quantize, model.leaf_modules(), is_leaf=Module.is_module)
    model.update_modules(leaves)
