"""Optimizers and learning-rate schedules (MLX's ``mlx.optimizers``)."""

from tessera.optimizers.optimizers import *  # noqa: F401,F403
from tessera.optimizers.optimizers import (AdaDelta, Adafactor, Adagrad, Adam, Adamax, AdamW,
                                           Lion, Muon, MultiOptimizer, Optimizer, RMSprop, SGD,
                                           clip_grad_norm)
# The module type that optimizers update, under the name mlx.optimizers exports it.
from tessera.nn.layers.base import Module
from tessera.optimizers.schedulers import (cosine_decay, exponential_decay, join_schedules,
                                           linear_schedule, step_decay)
