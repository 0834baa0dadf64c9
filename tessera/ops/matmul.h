// Matrix products. float32 / float64 go through BLAS; other inexact dtypes are
// computed in float32 and rounded; integer operands are rejected (reference).
//
//   auto c = matmul(a, b);          // batched, broadcast batch dims
//   auto d = addmm(c, a, b, 2.f);   // 2 (a @ b) + c
#pragma once

#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

array matmul(const array& a, const array& b, StreamOrDevice s = {});
// alpha (a @ b) + beta c
array addmm(array c, array a, array b, const float& alpha = 1.f, const float& beta = 1.f,
            StreamOrDevice s = {});
array inner(const array& a, const array& b, StreamOrDevice s = {});
array outer(const array& a, const array& b, StreamOrDevice s = {});
array tensordot(const array& a, const array& b, const int axis = 2, StreamOrDevice s = {});
array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s = {});

}  // namespace tessera
