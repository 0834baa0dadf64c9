// Elementwise functions of one array.
//
//   auto y = exp(x);          // float-out: ints become float32
//   auto n = isnan(y);        // bool
#pragma once

#include <optional>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

array abs(const array& a, StreamOrDevice s = {});
array positive(const array& a, StreamOrDevice s = {});
array negative(const array& a, StreamOrDevice s = {});
array sign(const array& a, StreamOrDevice s = {});
array logical_not(const array& a, StreamOrDevice s = {});
array reciprocal(const array& a, StreamOrDevice s = {});
array floor(const array& a, StreamOrDevice s = {});
array ceil(const array& a, StreamOrDevice s = {});
array trunc(const array& a, StreamOrDevice s = {});
array round(const array& a, int decimals, StreamOrDevice s = {});
array round(const array& a, StreamOrDevice s = {});
array square(const array& a, StreamOrDevice s = {});
array exp(const array& a, StreamOrDevice s = {});
array expm1(const array& a, StreamOrDevice s = {});
array sqrt(const array& a, StreamOrDevice s = {});
array rsqrt(const array& a, StreamOrDevice s = {});
array sin(const array& a, StreamOrDevice s = {});
array cos(const array& a, StreamOrDevice s = {});
array tan(const array& a, StreamOrDevice s = {});
array arcsin(const array& a, StreamOrDevice s = {});
array arccos(const array& a, StreamOrDevice s = {});
array arctan(const array& a, StreamOrDevice s = {});
array sinh(const array& a, StreamOrDevice s = {});
array cosh(const array& a, StreamOrDevice s = {});
array tanh(const array& a, StreamOrDevice s = {});
array arcsinh(const array& a, StreamOrDevice s = {});
array arccosh(const array& a, StreamOrDevice s = {});
array arctanh(const array& a, StreamOrDevice s = {});
array degrees(const array& a, StreamOrDevice s = {});
array radians(const array& a, StreamOrDevice s = {});
array log(const array& a, StreamOrDevice s = {});
array log2(const array& a, StreamOrDevice s = {});
array log10(const array& a, StreamOrDevice s = {});
array log1p(const array& a, StreamOrDevice s = {});
array sigmoid(const array& a, StreamOrDevice s = {});
array erf(const array& a, StreamOrDevice s = {});
array erfinv(const array& a, StreamOrDevice s = {});
array stop_gradient(const array& a, StreamOrDevice s = {});
array conjugate(const array& a, StreamOrDevice s = {});
array real(const array& a, StreamOrDevice s = {});
array imag(const array& a, StreamOrDevice s = {});
array bitwise_invert(const array& a, StreamOrDevice s = {});
array isnan(const array& a, StreamOrDevice s = {});
array isinf(const array& a, StreamOrDevice s = {});
array isfinite(const array& a, StreamOrDevice s = {});
array isposinf(const array& a, StreamOrDevice s = {});
array isneginf(const array& a, StreamOrDevice s = {});
// Replace NaN and infinities; infinities default to the dtype's max / lowest.
array nan_to_num(const array& a, float nan = 0.0f, std::optional<float> posinf = std::nullopt,
                 std::optional<float> neginf = std::nullopt, StreamOrDevice s = {});

array operator-(const array& a);
array operator~(const array& a);
array operator!(const array& a);

}  // namespace tessera
