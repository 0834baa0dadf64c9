// The FFT primitive: a discrete Fourier transform over some axes.
//
// Note [FFT primitive]
// The input comes cropped or padded to the transform's lengths and cast by the
// op (ops/fft.cpp): complex64 for complex and inverse real transforms, float32
// for forward real ones. The output is row-contiguous, scaled by scale().
//   real = false  complex to complex over axes, forward (e^-i) or inverse (e^+i),
//                 unnormalised apart from the scale.
//   real, forward    float32 (..., n) -> complex64 (..., n / 2 + 1) on the last
//                    axis of axes, then complex on the others.
//   real, inverse    complex64 (..., n / 2 + 1) -> float32 (..., n): complex on
//                    the other axes, then Hermitian to real on the last; the
//                    imaginary parts of the bins that must be real are ignored.
// real_n() is n, the length of the real side on the last axis.
#pragma once

#include <vector>

#include "tessera/core/primitive.h"

namespace tessera {

class FFT : public UnaryPrimitive {
 public:
  FFT(Stream s, std::vector<int> axes, bool inverse, bool real, int real_n, double scale)
      : UnaryPrimitive(s), axes_(std::move(axes)), inverse_(inverse), real_(real),
        real_n_(real_n), scale_(scale) {}
  TESSERA_PRIMITIVE(FFT, axes_, inverse_, real_, real_n_, scale_)
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;


 private:
  std::vector<int> axes_;
  bool inverse_;
  bool real_;
  int real_n_;
  double scale_;
};

}  // namespace tessera
