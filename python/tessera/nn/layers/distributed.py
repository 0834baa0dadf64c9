"""Layers sharded over a distributed group (MLX's ``mlx.nn.layers.distributed``).

Tensor parallelism splits a linear layer over the processes of a group:

* ``AllToShardedLinear``: every process sees the whole input and computes its
  slice of the output features (gradients of the input are summed over the
  group in the backward pass);
* ``ShardedToAllLinear``: every process holds a slice of the input features,
  and the partial products are summed over the group (``all_sum``).

``shard_linear`` makes one from a ``Linear`` or ``QuantizedLinear``,
``shard_inplace`` slices a module's parameters in place, and ``fully_shard``
splits every parameter on axis 0 (gathered for the forward pass). Over a group
of one process every layer computes what the unsharded one does.
"""

import math
from functools import lru_cache
from typing import Callable, Optional, Union

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.nn.layers.linear import Linear
from tessera.nn.layers.quantized import _defaults_for_mode
from tessera.utils import tree_flatten, tree_map_with_path, tree_unflatten

_SHARDINGS = ("all-to-sharded", "sharded-to-all")


@lru_cache
def sum_gradients(group):
    """The identity whose vjp sums the cotangent over ``group``."""
    if group.size() == 1:
        return lambda x: x

    @mx.custom_function
    def f(x):
        return x

    @f.vjp
    def f(x, dx, _):
        return mx.distributed.all_sum(dx, group=group)

    return f


def _split(weight, segments, axis):
    """``mx.split`` that also takes fractions of the axis (floats) as split points."""
    if isinstance(segments, int) or isinstance(segments[0], int):
        return mx.split(weight, segments, axis=axis)
    n = weight.shape[axis]
    return mx.split(weight, [int(s * n) for s in segments], axis=axis)


def _shard(parameters, predicate: Callable, group=None):
    """The parameter tree with each array for which ``predicate(path, array)``
    gives an axis, or ``(axis, segments)``, replaced by this rank's shard: each
    segment is split in ``group.size()`` pieces along the axis, and this rank's
    pieces are concatenated."""
    group = group or mx.distributed.init()
    n, r = group.size(), group.rank()

    def shard(path, weight):
        if not isinstance(weight, mx.array):
            return weight
        s = predicate(path, weight)
        if s is None:
            return weight
        if isinstance(s, int):
            axis, segments = s, 1
        elif isinstance(s, tuple):
            axis, segments = s
        else:
            raise ValueError("[shard] the sharding function must return an int or a tuple "
                             f"(axis, segments), not {type(s).__name__}")
        parts = [_split(part, n, axis)[r] for part in _split(weight, segments, axis)]
        return mx.contiguous(mx.concatenate(parts, axis=axis))

    return tree_map_with_path(shard, parameters)


def _all_to_sharded(segments):
    # Output features: axis -2 of a weight (0 for a vector), the bias's only axis.
    def predicate(path, weight):
        if path.endswith("bias"):
            return -1, segments
        return max(weight.ndim - 2, 0), segments

    return predicate


def _sharded_to_all(segments):
    # Input features: the weight's last axis; the bias stays whole.
    def predicate(path, weight):
        if path.endswith("bias"):
            return None
        return -1, segments

    return predicate


def _check_sharding(sharding):
    if sharding not in _SHARDINGS:
        raise ValueError(f"[shard] sharding must be 'all-to-sharded' or 'sharded-to-all', "
                         f"not {sharding!r}")


def _check_divisible(what, dims, n):
    if dims % n != 0:
        raise ValueError(f"[shard] the {what} of size {dims} cannot be split over {n} "
                         f"processes")


def shard_inplace(module: Module, sharding: Union[str, Callable], *,
                  segments: Union[int, list] = 1, group=None):
    """Replaces the module's parameters by this rank's shards. ``sharding`` is
    ``"all-to-sharded"``, ``"sharded-to-all"`` or a function ``(path, weight)
    -> axis | (axis, segments) | None``. The module's computation is unchanged:
    the communication is the caller's."""
    if isinstance(sharding, str):
        _check_sharding(sharding)
        sharding = (_all_to_sharded if sharding == _SHARDINGS[0] else _sharded_to_all)(segments)
    module.update(_shard(module.parameters(), sharding, group))


def shard_linear(module: Module, sharding: str, *, segments: Union[int, list] = 1,
                 group=None):
    """A new sharded layer made from a ``Linear`` (or a ``QuantizedLinear``)."""
    _check_sharding(sharding)
    quantized = not isinstance(module, Linear)
    cls = {
        ("all-to-sharded", False): AllToShardedLinear,
        ("all-to-sharded", True): QuantizedAllToShardedLinear,
        ("sharded-to-all", False): ShardedToAllLinear,
        ("sharded-to-all", True): QuantizedShardedToAllLinear,
    }[sharding, quantized]
    make = cls.from_quantized_linear if quantized else cls.from_linear
    return make(module, segments=segments, group=group)


def _uniform(input_dims, shape):
    scale = math.sqrt(1.0 / input_dims)
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


class _ShardedLinear(Module):
    """What the four sharded layers share: the group, and the construction
    from an unsharded layer."""

    _output_sharded: bool  # True: AllToSharded (output features split)

    def _init_group(self, group, input_dims, output_dims):
        self.group = group or mx.distributed.init()
        n = self.group.size()
        if self._output_sharded:
            _check_divisible("output", output_dims, n)
            return output_dims // n, input_dims
        _check_divisible("input", input_dims, n)
        return output_dims, input_dims // n

    def _full_dims(self, out_dims, in_dims):
        n = self.group.size()
        return (out_dims * n, in_dims) if self._output_sharded else (out_dims, in_dims * n)

    @classmethod
    def _predicate(cls, segments):
        return (_all_to_sharded if cls._output_sharded else _sharded_to_all)(segments)


class _FloatSharded(_ShardedLinear):
    def __init__(self, input_dims: int, output_dims: int, bias: bool = True, group=None):
        super().__init__()
        out_shard, in_shard = self._init_group(group, input_dims, output_dims)
        self.weight = _uniform(input_dims, (out_shard, in_shard))
        if bias:
            self.bias = _uniform(input_dims, (out_shard if self._output_sharded else output_dims,))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self._full_dims(*self.weight.shape)
        return f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}"

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1, group=None):
        """The sharded layer holding this rank's part of ``linear_layer``."""
        group = group or mx.distributed.init()
        output_dims, input_dims = linear_layer.weight.shape
        layer = cls(input_dims, output_dims, "bias" in linear_layer, group)
        layer.update(_shard(linear_layer.parameters(), cls._predicate(segments), group))
        return layer


class AllToShardedLinear(_FloatSharded):
    """Full input, this rank's slice of the output features; the input's
    gradient is summed over the group."""

    _output_sharded = True

    def __call__(self, x):
        x = sum_gradients(self.group)(x)
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T


class ShardedToAllLinear(_FloatSharded):
    """This rank's slice of the input features; the partial products are
    summed over the group, so every rank gets the full output."""

    _output_sharded = False

    def __call__(self, x):
        x = mx.distributed.all_sum(x @ self["weight"].T, group=self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x


class _QuantizedSharded(_ShardedLinear):
    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group_size: int = 64, bits: int = 4, mode: str = "affine", group=None):
        super().__init__()
        self.group_size, self.bits = _defaults_for_mode(mode, group_size, bits)
        self.mode = mode
        out_shard, in_shard = self._init_group(group, input_dims, output_dims)
        self.weight, self.scales, *biases = mx.quantize(
            _uniform(input_dims, (out_shard, in_shard)), self.group_size, self.bits, mode=mode)
        self.biases = biases[0] if biases else None
        if bias:
            self.bias = mx.zeros((out_shard if self._output_sharded else output_dims,))
        self.freeze()

    def unfreeze(self, *args, **kwargs):
        # The quantized parameters stay frozen.
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False)
        return self

    def _extra_repr(self) -> str:
        out_dims, packed = self.weight.shape
        out_dims, in_dims = self._full_dims(out_dims, packed * 32 // self.bits)
        return (f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}, "
                f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}")

    def _matmul(self, x):
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"],
                                   biases=self.get("biases"), transpose=True,
                                   group_size=self.group_size, bits=self.bits, mode=self.mode)

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer: Module, *,
                              segments: Union[int, list] = 1, group=None):
        """The sharded layer holding this rank's part of ``quantized_linear_layer``."""
        group = group or mx.distributed.init()
        q = quantized_linear_layer
        output_dims, packed = q.weight.shape
        layer = cls(packed * 32 // q.bits, output_dims, "bias" in q, group_size=q.group_size,
                    bits=q.bits, mode=getattr(q, "mode", "affine"), group=group)
        layer.update(_shard(q.parameters(), cls._predicate(segments), group))
        return layer


class QuantizedAllToShardedLinear(_QuantizedSharded):
    """:class:`AllToShardedLinear` with a quantized weight (frozen)."""

    _output_sharded = True

    def __call__(self, x):
        x = self._matmul(sum_gradients(self.group)(x))
        if "bias" in self:
            x = x + self["bias"]
        return x


class QuantizedShardedToAllLinear(_QuantizedSharded):
    """:class:`ShardedToAllLinear` with a quantized weight (frozen)."""

    _output_sharded = False

    def __call__(self, x):
        x = mx.distributed.all_sum(self._matmul(x), group=self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x


def _shardable(module, key, value):
    return (not isinstance(value, FullyShardedModule)
            and Module.valid_parameter_filter(module, key, value))


class FullyShardedModule(Module):
    """Wraps a module so that each rank stores only its shard (axis 0) of every
    parameter: the full parameters are gathered (``all_gather``) for each call
    and the gradients reduce-scattered (``sum_scatter``, averaged) back to the
    shards. ``compute_dtype`` casts the gathered parameters."""

    def __init__(self, module: Module, group=None, compute_dtype=None):
        super().__init__()
        group = group or mx.distributed.init()
        n = group.size()
        flat = tree_flatten(module.filter_and_map(_shardable))
        for path, a in flat:
            if a.ndim == 0:
                raise ValueError(f"[fully_shard] cannot shard the scalar parameter '{path}'")
            if a.shape[0] % n != 0:
                raise ValueError(f"[fully_shard] cannot shard parameter '{path}' of shape "
                                 f"{tuple(a.shape)} over {n} processes: axis 0 must be "
                                 f"divisible by {n}")
        object.__setattr__(self, "_paths", [k for k, _ in flat])
        full_shapes = [tuple(a.shape) for _, a in flat]
        module.update(_shard(module.filter_and_map(_shardable), lambda p, w: 0, group))
        self.module = module
        object.__setattr__(self, "_gather", _gather_fn(group, full_shapes, compute_dtype))

    def _extra_repr(self) -> str:
        return f"num_sharded_params={len(self._paths)}"

    def _gathered_call(self, fn, *args, **kwargs):
        shard_tree = self.module.filter_and_map(_shardable)
        fulls = self._gather([a for _, a in tree_flatten(shard_tree)])
        self.module.update(tree_unflatten(list(zip(self._paths, fulls))))
        try:
            return fn(*args, **kwargs)
        finally:
            self.module.update(shard_tree)

    def __call__(self, *args, **kwargs):
        return self._gathered_call(self.module, *args, **kwargs)

    def as_linear(self, *args, **kwargs):
        return self._gathered_call(self.module.as_linear, *args, **kwargs)


def _gather_fn(group, full_shapes, compute_dtype):
    """shards -> full parameters (all_gather of the flattened shards, in one
    message); its vjp reduce-scatters the cotangents, averaged over the group."""
    n = group.size()
    sizes = [math.prod(s) // n for s in full_shapes]
    splits = [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)]

    def cast(x, dtype):
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)

    @mx.custom_function
    def gather(shards):
        flat = mx.concatenate([cast(s.reshape(1, -1), compute_dtype) for s in shards], axis=1)
        parts = mx.split(mx.distributed.all_gather(flat, group=group), splits, axis=1)
        return [p.reshape(s) for p, s in zip(parts, full_shapes)]

    @gather.vjp
    def gather(shards, cotangents, _):
        flat = mx.concatenate([c.reshape(n, -1) for c in cotangents], axis=1)
        parts = mx.split(mx.distributed.sum_scatter(flat, group=group) / n, splits, axis=1)
        return [cast(p.reshape(s.shape), s.dtype) for p, s in zip(parts, shards)]

    return gather


def fully_shard(module: Module, *, group=None, compute_dtype=None) -> Module:
    """``module`` wrapped in a :class:`FullyShardedModule`, or ``module``
    itself over a group of one process (or with nothing to shard)."""
    group = group or mx.distributed.init()
    if group.size() == 1 or isinstance(module, FullyShardedModule):
        return module
    wrapped = FullyShardedModule(module, group=group, compute_dtype=compute_dtype)
    return wrapped if wrapped._paths else module
