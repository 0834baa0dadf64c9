"""Neural-network layers, losses and initializers (MLX's ``mlx.nn``)."""

from tessera.nn import init, losses
from tessera.nn.layers import *  # noqa: F401,F403
from tessera.nn.layers import Module
from tessera.nn.utils import average_gradients, checkpoint, value_and_grad
