"""Normalization layers (features on the last axis)."""

import tessera.core as mx
from tessera.nn.layers.base import Module


def _check_eps(cls, eps):
    if eps <= 0:
        raise ValueError(f"[{cls}] eps must be positive but is {eps}")


class _AffineNorm(Module):
    """A normalization of ``dims`` features with eps > 0 and, with ``affine``,
    a weight (ones) and, with ``bias``, a bias (zeros)."""

    def __init__(self, dims: int, eps: float, affine: bool, bias: bool = True):
        super().__init__()
        _check_eps(type(self).__name__, eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"


class InstanceNorm(_AffineNorm):
    """Normalizes each channel of each sample over the spatial dims."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False):
        super().__init__(dims, eps, affine)

    def __call__(self, x):
        reduction_axes = tuple(range(1, x.ndim - 1))
        mean = mx.mean(x, axis=reduction_axes, keepdims=True)
        var = mx.var(x, axis=reduction_axes, keepdims=True)
        x = (x - mean) * mx.rsqrt(var + self.eps)
        return (self.weight * x + self.bias) if "weight" in self else x


class LayerNorm(_AffineNorm):
    """``(x - mean) * rsqrt(var + eps) * weight + bias`` over the last axis."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True, bias: bool = True):
        super().__init__(dims, eps, affine, bias)

    def __call__(self, x):
        weight = self.weight if "weight" in self else None
        bias = self.bias if "bias" in self else None
        return mx.fast.layer_norm(x, weight, bias, self.eps)


class RMSNorm(Module):
    """``x * rsqrt(mean(x**2) + eps) * weight`` over the last axis."""

    def __init__(self, dims: int, eps: float = 1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Per-sample statistics over spatial positions and the channels of a group.

    By default channel ``c`` belongs to group ``c % num_groups``; with
    ``pytorch_compatible`` groups are contiguous channel blocks.
    """

    def __init__(self, num_groups: int, dims: int, eps: float = 1e-5, affine: bool = True,
                 pytorch_compatible: bool = False):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if dims % num_groups != 0:
            raise ValueError(f"[GroupNorm] dims {dims} is not divisible by num_groups "
                             f"{num_groups}")
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (f"{self.num_groups}, {self.dims}, eps={self.eps}, affine={'weight' in self}, "
                f"pytorch_compatible={self.pytorch_compatible}")

    def _pytorch_compatible_group_norm(self, x):
        num_groups = self.num_groups
        batch, *rest, dims = x.shape
        group_size = dims // num_groups
        x = mx.reshape(x, (batch, -1, num_groups, group_size))
        x = mx.reshape(mx.transpose(x, (0, 2, 1, 3)), (batch, num_groups, -1))
        x = mx.fast.layer_norm(x, None, None, self.eps)
        x = mx.reshape(x, (batch, num_groups, -1, group_size))
        x = mx.reshape(mx.transpose(x, (0, 2, 1, 3)), tuple([batch] + rest + [dims]))
        return x

    def _group_norm(self, x):
        num_groups = self.num_groups
        batch, *rest, dims = x.shape
        x = mx.reshape(x, (batch, -1, num_groups))
        means = mx.mean(x, axis=1, keepdims=True)
        var = mx.var(x, axis=1, keepdims=True)
        x = (x - means) * mx.rsqrt(var + self.eps)
        return mx.reshape(x, tuple([batch] + rest + [dims]))

    def __call__(self, x):
        group_norm = (self._pytorch_compatible_group_norm if self.pytorch_compatible
                      else self._group_norm)
        x = group_norm(x)
        return (self.weight * x + self.bias) if "weight" in self else x


class BatchNorm(Module):
    """Batch statistics over all but the last axis in training (updating the
    running statistics), the running statistics in eval mode."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if self.track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def unfreeze(self, *args, **kwargs):
        """Unfreezes, keeping the running statistics frozen."""
        super().unfreeze(*args, **kwargs)
        self.freeze(keys=["running_mean", "running_var"], recurse=False)
        return self

    def _extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={'weight' in self}, track_running_stats={self.track_running_stats}")

    def _calc_stats(self, x):
        reduction_axes = tuple(range(0, x.ndim - 1))
        mean = mx.mean(x, axis=reduction_axes)
        var = mx.var(x, axis=reduction_axes)
        return mean, var

    def __call__(self, x):
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError(f"[BatchNorm] expected a 2-D to 4-D input but got {x.ndim}-D")

        if self.training or not self.track_running_stats:
            mean, var = self._calc_stats(x)
            if self.training and self.track_running_stats:
                mu = self.momentum
                n = x.size / x.shape[-1]
                self.running_mean = (1 - mu) * self.running_mean + mu * mean
                self.running_var = (1 - mu) * self.running_var + mu * var * (n / (n - 1))
        else:
            mean, var = self.running_mean, self.running_var

        x = (x - mean) * mx.rsqrt(var + self.eps)
        return (self.weight * x + self.bias) if "weight" in self else x
