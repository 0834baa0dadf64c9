// Lets MLX C++ code compile against Tessera: `namespace mx = tessera;`
#pragma once

#include "tessera/tessera.h"

namespace mlx {
namespace core = ::tessera;
}  // namespace mlx
