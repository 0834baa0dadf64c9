"""Optimizers and learning-rate schedules (MLX's ``mlx.optimizers``)."""

from tessera.optimizers.optimizers import *  # noqa: F401,F403
from tessera.optimizers.optimizers import (AdaDelta, Adafactor, Adagrad, Adam, Adamax, AdamW,
                                           Lion, Muon, MultiOptimizer, Optimizer, RMSprop, SGD,
                                           clip_grad_norm)
from tessera.optimizers.schedulers import (cosine_decay, exponential_decay, join_schedules,
                                           linear_schedule, step_decay)
