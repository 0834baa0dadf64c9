// eval_cpu of FFT through pocketfft (third_party/pocketfft, BSD licence); the
// one translation unit that instantiates it. pocketfft reads the input in
// place through its strides (views, broadcasts and negative steps included)
// and writes the row-contiguous output. Plans are cached by pocketfft.
#define POCKETFFT_CACHE_SIZE 16
#include "third_party/pocketfft/pocketfft_hdronly.hpp"

#include <complex>

#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/fft.h"

namespace tessera {

namespace {

constexpr size_t kParallelElements = 1 << 16;

pocketfft::stride_t byte_strides(const array& a) {
  pocketfft::stride_t st(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) {
    st[d] = static_cast<ptrdiff_t>(a.strides()[d] * static_cast<int64_t>(a.itemsize()));
  }
  return st;
}

pocketfft::shape_t to_shape(const Shape& shape) {
  return pocketfft::shape_t(shape.begin(), shape.end());
}

}  // namespace

void FFT::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const pocketfft::shape_t axes(axes_.begin(), axes_.end());
  const auto in_strides = byte_strides(in), out_strides = byte_strides(out);
  const float fct = static_cast<float>(scale_);
  const size_t threads = std::max(in.size(), out.size()) >= kParallelElements
                             ? static_cast<size_t>(cpu::num_threads())
                             : 1;
  using C = std::complex<float>;
  if (!real_) {
    pocketfft::c2c(to_shape(in.shape()), in_strides, out_strides, axes, !inverse_,
                   in.data<C>(), out.data<C>(), fct, threads);
  } else if (!inverse_) {
    pocketfft::r2c(to_shape(in.shape()), in_strides, out_strides, axes, true, in.data<float>(),
                   out.data<C>(), fct, threads);
  } else {
    pocketfft::c2r(to_shape(out.shape()), in_strides, out_strides, axes, false, in.data<C>(),
                   out.data<float>(), fct, threads);
  }
}

}  // namespace tessera
