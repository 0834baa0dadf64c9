// Window functions, computed in float64 from arange and cos, returned as float32.
#include "tessera/ops/window.h"

#include <cmath>
#include <numbers>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/unary.h"

namespace tessera {

namespace {

// M < 1: empty; M == 1: [1]; else f(2 pi n / (M - 1)) for n in [0, M), in float64.
template <typename F>
array window(int M, F&& f, StreamOrDevice s) {
  if (M < 1) return zeros({0}, float32, s);
  if (M == 1) return ones({1}, float32, s);
  array phase = multiply(arange(0.0, double(M), 1.0, float64, s),
                         array(2 * std::numbers::pi / (M - 1), float64), s);
  return astype(f(phase), float32, s);
}

array scalar(double v) { return array(v, float64); }

}  // namespace

array hanning(int M, StreamOrDevice s) {
  return window(M, [&](const array& p) {
    return subtract(scalar(0.5), multiply(scalar(0.5), cos(p, s), s), s);
  }, s);
}

array hamming(int M, StreamOrDevice s) {
  return window(M, [&](const array& p) {
    return subtract(scalar(0.54), multiply(scalar(0.46), cos(p, s), s), s);
  }, s);
}

array blackman(int M, StreamOrDevice s) {
  return window(M, [&](const array& p) {
    array a = subtract(scalar(0.42), multiply(scalar(0.5), cos(p, s), s), s);
    return add(a, multiply(scalar(0.08), cos(multiply(scalar(2.0), p, s), s), s), s);
  }, s);
}

array bartlett(int M, StreamOrDevice s) {
  // p / pi = 2 n / (M - 1)
  return window(M, [&](const array& p) {
    array r = divide(p, scalar(std::numbers::pi), s);
    return subtract(scalar(1.0), abs(subtract(r, scalar(1.0), s), s), s);
  }, s);
}

}  // namespace tessera
