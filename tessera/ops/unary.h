// Elementwise functions of one array.
//
//   auto y = exp(x);          // float-out: ints become float32
//   auto n = isnan(y);        // bool
#pragma once

#include <optional>

#include "tessera/core/array.h"
#include "tessera/core/device.h"
#include "tessera/ops/elementwise_table.h"

namespace tessera {

// The ops of TESSERA_UNARY_OPS, all (a) (Note [Elementwise tables]).
#define TESSERA_DECLARE_UNARY(NAME, FN, RULE) array FN(const array& a, StreamOrDevice s = {});
TESSERA_UNARY_OPS(TESSERA_DECLARE_UNARY)
#undef TESSERA_DECLARE_UNARY
array positive(const array& a, StreamOrDevice s = {});
array round(const array& a, int decimals, StreamOrDevice s = {});
array round(const array& a, StreamOrDevice s = {});
array stop_gradient(const array& a, StreamOrDevice s = {});
// Replace NaN and infinities; infinities default to the dtype's max / lowest.
array nan_to_num(const array& a, float nan = 0.0f, std::optional<float> posinf = std::nullopt,
                 std::optional<float> neginf = std::nullopt, StreamOrDevice s = {});

array operator-(const array& a);
array operator~(const array& a);
array operator!(const array& a);

}  // namespace tessera
