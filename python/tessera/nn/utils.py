"""Module-aware transforms: ``value_and_grad`` and ``checkpoint``."""

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
    """All-reduce mean of a gradient tree over a distributed group; the identity
    for a group of one process (the only kind while the core has no
    ``distributed`` module). Each leaf is reduced on its own
    (``all_reduce_size`` batching is not done)."""
    from tessera.utils import tree_map

    dist = getattr(mx, "distributed", None)
    if dist is None:
        if group is not None and group.size() != 1:
            raise RuntimeError("[average_gradients] this build has no distributed backend")
        return gradients
    group = group or dist.init()
    n = group.size()
    if n == 1:
        return gradients
    return tree_map(lambda g: dist.all_sum(g, group=group, stream=communication_stream) / n,
                    gradients)
