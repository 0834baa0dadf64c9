"""MLX's module path of the transposed convolutions (they live in convolution.py)."""

from tessera.nn.layers.convolution import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
