// Window functions of length M (float32), as NumPy defines them: M < 1 gives
// an empty array, M == 1 the single value 1.
//
//   auto w = hanning(256);
#pragma once

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// 0.5 - 0.5 cos(2 pi n / (M - 1))
array hanning(int M, StreamOrDevice s = {});
// 0.54 - 0.46 cos(2 pi n / (M - 1))
array hamming(int M, StreamOrDevice s = {});
// 0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))
array blackman(int M, StreamOrDevice s = {});
// 1 - |2 n / (M - 1) - 1|, the triangle
array bartlett(int M, StreamOrDevice s = {});

}  // namespace tessera
