// Transform rules of FFT. The transform is linear, so its jvp is the same
// transform of the tangent. Cotangents follow the convention of Matmul's rules
// (the adjoint, conjugate-linear): for y = scale F x with F the unnormalised
// DFT, x's cotangent is scale F^H c, and F^H is the unnormalised transform in
// the other direction, so a complex transform's vjp is the opposite transform
// with the same scale. The real transforms need the Hermitian weights: rfft
// keeps only the bins 0..n/2, so its vjp is the real inverse of the cotangent
// with the bins that stand for two (all but 0 and, for even n, n/2) halved;
// irfft reads each of those bins twice, so its vjp is the real forward
// transform of the cotangent with them doubled.
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/fft.h"

namespace tessera {

namespace {

// Weights over the last transformed axis of a half spectrum of m = n / 2 + 1
// bins: 1 at bin 0 and (n even) at bin n/2, `middle` elsewhere; shaped to
// broadcast against an array of `ndim` dimensions.
array hermitian_weights(int n, int axis, int ndim, float middle, Stream s) {
  const int m = n / 2 + 1;
  std::vector<float> w(m, middle);
  w[0] = 1.f;
  if (n % 2 == 0) w[m - 1] = 1.f;
  Shape shape(ndim, 1);
  shape[axis] = m;
  return array(w.begin(), shape, float32);
}

}  // namespace

std::vector<array> FFT::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents, const std::vector<int>&) {
  const array& x = primals[0];
  Shape shape = output_shapes(primals)[0];
  Dtype out_dtype = real_ && inverse_ ? float32 : complex64;
  return {array(std::move(shape), out_dtype,
                std::make_shared<FFT>(stream(), axes_, inverse_, real_, real_n_, scale_),
                {astype(tangents[0], x.dtype(), stream())})};
}

std::vector<array> FFT::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents, const std::vector<int>&,
                            const std::vector<array>&) {
  auto s = stream();
  const array& x = primals[0];
  auto adjoint = std::make_shared<FFT>(s, axes_, !inverse_, real_, real_n_, scale_);
  const int nd = static_cast<int>(x.ndim());
  if (!real_) {
    return {array(x.shape(), complex64, adjoint, {astype(cotangents[0], complex64, s)})};
  }
  if (!inverse_) {
    // rfft: x real (..., n), cotangent (..., n / 2 + 1).
    array c = multiply(astype(cotangents[0], complex64, s),
                       hermitian_weights(real_n_, axes_.back(), nd, 0.5f, s), s);
    return {array(x.shape(), float32, adjoint, {c})};
  }
  // irfft: x (..., n / 2 + 1), cotangent real (..., n).
  array g(x.shape(), complex64, adjoint, {astype(cotangents[0], float32, s)});
  return {multiply(g, hermitian_weights(real_n_, axes_.back(), nd, 2.f, s), s)};
}

std::pair<std::vector<array>, std::vector<int>> FFT::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  const int b = axes[0];
  if (b < 0) {
    Shape shape = output_shapes(inputs)[0];
    Dtype t = real_ && inverse_ ? float32 : complex64;
    return {{array(std::move(shape), t,
                   std::make_shared<FFT>(stream(), axes_, inverse_, real_, real_n_, scale_),
                   inputs)},
            {-1}};
  }
  std::vector<int> shifted = axes_;
  for (auto& ax : shifted) {
    if (ax >= b) ++ax;
  }
  auto batched = std::make_shared<FFT>(stream(), shifted, inverse_, real_, real_n_, scale_);
  Shape shape = batched->output_shapes(inputs)[0];
  Dtype t = real_ && inverse_ ? float32 : complex64;
  return {{array(std::move(shape), t, batched, inputs)}, {b}};
}

}  // namespace tessera
