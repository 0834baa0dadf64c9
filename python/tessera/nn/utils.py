"""Module-aware transforms (``value_and_grad``, ``checkpoint``) and gradient
helpers over a distributed group."""

from functools import wraps
from typing import Callable, Optional

import tessera.core as mx

from tessera.nn.layers.base import Module


def _of_parameters(module: Module, fn: Callable):
    """``fn`` as a function of the module's parameters, passed first."""

    def inner_fn(params, *args, **kwargs):
        module.update(params)
        return fn(*args, **kwargs)

    return inner_fn


def value_and_grad(model: Module, fn: Callable):
    """``(*args, **kwargs) -> (value, grads)`` with the gradients of ``fn`` with
    respect to ``model.trainable_parameters()``."""
    value_grad_fn = mx.value_and_grad(_of_parameters(model, fn))

    @wraps(fn)
    def wrapped_value_grad_fn(*args, **kwargs):
        value, grad = value_grad_fn(model.trainable_parameters(), *args, **kwargs)
        return value, grad

    return wrapped_value_grad_fn


def checkpoint(module: Module, fn: Optional[Callable] = None):
    """Gradient checkpointing of ``fn`` (default: the module) with respect to the
    module's trainable parameters and the call inputs."""
    if fn is None:
        fn = module.__call__

    checkpointed_fn = mx.checkpoint(_of_parameters(module, fn))

    @wraps(fn)
    def wrapped_checkpointed_fn(*args, **kwargs):
        return checkpointed_fn(module.trainable_parameters(), *args, **kwargs)

    return wrapped_checkpointed_fn


def average_gradients(gradients, group=None, all_reduce_size: int = 32 * 1024**2,
                      communication_stream=None):
    """All-reduce mean of a gradient tree over a distributed group (default: the
    global group); the identity over a group of one process. Arrays of one
    dtype are concatenated into messages of about ``all_reduce_size`` bytes
    (0 or less: one message per array)."""
    from tessera.utils import tree_flatten, tree_map, tree_unflatten

    group = group or mx.distributed.init()
    n = group.size()
    if n == 1:
        return gradients

    def mean(x):
        return mx.distributed.all_sum(x, group=group, stream=communication_stream) / n

    flat = tree_flatten(gradients)
    if all_reduce_size <= 0 or not flat or len({g.dtype for _, g in flat}) > 1:
        return tree_map(mean, gradients)
    batches, batch, nbytes = [], [], 0
    for key, g in flat:
        batch.append((key, g))
        nbytes += g.nbytes
        if nbytes >= all_reduce_size:
            batches.append(batch)
            batch, nbytes = [], 0
    if batch:
        batches.append(batch)
    out = []
    for batch in batches:
        sizes = [g.size for _, g in batch]
        splits = [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)]
        reduced = mx.split(mean(mx.concatenate([g.reshape(-1) for _, g in batch])), splits)
        out.extend((k, r.reshape(g.shape)) for (k, g), r in zip(batch, reduced))
    return tree_unflatten(out)


def clip_grad_norm_sharded(gradients, max_norm: float, group=None):
    """Clips gradients sharded over a group to a global norm of at most
    ``max_norm``: the squared norms of the local shards are summed over the
    group. Returns ``(clipped local gradients, global norm)``."""
    from tessera.utils import tree_map, tree_reduce

    local = tree_reduce(lambda acc, g: acc + g.square().sum(), gradients, 0.0)
    norm = mx.sqrt(mx.distributed.all_sum(local, group=group))
    scale = mx.minimum(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * scale, gradients), norm
