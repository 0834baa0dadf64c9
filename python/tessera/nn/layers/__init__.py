from tessera.nn.layers.activations import *  # noqa: F401,F403
from tessera.nn.layers.activations import (GELU, GLU, CELU, ELU, PReLU, LeakyReLU,
                                           Softshrink, HardShrink, HardTanh, Step)
from tessera.nn.layers.base import Module
from tessera.nn.layers.containers import Sequential
from tessera.nn.layers.dropout import Dropout, Dropout2d, Dropout3d
from tessera.nn.layers.distributed import (AllToShardedLinear, FullyShardedModule,
                                           QuantizedAllToShardedLinear,
                                           QuantizedShardedToAllLinear, ShardedToAllLinear,
                                           fully_shard, shard_inplace, shard_linear)
from tessera.nn.layers.embedding import Embedding
from tessera.nn.layers.linear import Bilinear, Identity, Linear
from tessera.nn.layers.normalization import (BatchNorm, GroupNorm, InstanceNorm, LayerNorm,
                                             RMSNorm)
from tessera.nn.layers.quantized import (QQLinear, QuantizedEmbedding, QuantizedLinear,
                                         quantize)
from tessera.nn.layers.positional_encoding import ALiBi, RoPE, SinusoidalPositionalEncoding
from tessera.nn.layers.recurrent import GRU, LSTM, RNN
from tessera.nn.layers.transformer import (MultiHeadAttention, Transformer,
                                           TransformerDecoder, TransformerDecoderLayer,
                                           TransformerEncoder, TransformerEncoderLayer)
from tessera.nn.layers import convolution_transpose  # noqa: F401 (MLX's module path)
from tessera.nn.layers.convolution import (Conv1d, Conv2d, Conv3d, ConvTranspose1d,
                                           ConvTranspose2d, ConvTranspose3d)
from tessera.nn.layers.pooling import (AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d,
                                       MaxPool3d)
from tessera.nn.layers.upsample import Upsample, upsample_cubic, upsample_linear, upsample_nearest
