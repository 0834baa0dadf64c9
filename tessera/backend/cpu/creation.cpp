// eval_cpu of Arange, Linspace, Band, View, AsStrided.
#include <algorithm>
#include <cmath>

#include "tessera/backend/common/creation.h"
#include "tessera/backend/common/views.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/creation.h"

namespace tessera {

namespace {

constexpr int64_t kGrain = 1 << 16;

// out[i] = f(i) for every element of a freshly allocated row-contiguous out.
template <typename T, typename F>
void fill_indexed(array& out, F&& f) {
  T* p = out.data<T>();
  cpu::parallel_for(static_cast<int64_t>(out.size()), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(i);
  });
}

}  // namespace

void Arange::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  tessera::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (tessera::is_integral_v<T>) {
      // Modular arithmetic in 64 bits, truncated to T: the increment is
      // dtype(start + step) - dtype(start), wrapping like the dtype does.
      uint64_t s = static_cast<uint64_t>(tessera::cast_to<T>(start_));
      uint64_t inc = static_cast<uint64_t>(tessera::cast_to<T>(start_ + step_)) - s;
      fill_indexed<T>(out, [=](int64_t i) { return static_cast<T>(s + uint64_t(i) * inc); });
    } else {
      double s = tessera::cast_to<double>(tessera::cast_to<T>(start_));
      double inc = tessera::cast_to<double>(tessera::cast_to<T>(start_ + step_)) - s;
      fill_indexed<T>(out, [=](int64_t i) { return tessera::cast_to<T>(s + double(i) * inc); });
    }
  });
}

void Linspace::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  const int64_t n = static_cast<int64_t>(out.size());
  const int64_t div = endpoint_ ? n - 1 : n;
  const double start = start_, stop = stop_;
  tessera::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    fill_indexed<T>(out, [=](int64_t i) {
      if (div == 0) return tessera::cast_to<T>(start);
      return tessera::cast_to<T>(creation::linspace_value<C>(i, div, C(start), C(stop)));
    });
  });
}

void Band::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  const Strides in_strides = in.strides();
  const bool in_place =
      in.flags().row_contiguous && in.data_size() == in.size() && in.is_donatable();
  if (in_place) {
    array donor = in;
    out.move_shared_buffer(donor);
  } else {
    out.set_data(allocator::malloc(out.nbytes()));
  }
  const int nd = static_cast<int>(out.ndim());
  const int64_t rows_per_matrix = out.shape(nd - 2);
  const int64_t cols = out.shape(nd - 1);
  const Strides out_strides = row_major_strides(out.shape());
  const int64_t lo = lo_, hi = hi_;
  tessera::dispatch_bytes(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = in_place ? nullptr : in.data<T>();
    T* dst = out.data<T>();
    int64_t rows = static_cast<int64_t>(out.size()) / cols;
    cpu::parallel_for(rows, std::max<int64_t>(1, kGrain / cols), [&](int64_t b, int64_t e) {
      tessera::for_each_row<2>(
          out.shape(), {in_strides, out_strides}, b, e,
          [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& inc) {
            int64_t i = (off[1] / cols) % rows_per_matrix;
            int64_t keep_lo = std::clamp<int64_t>(i + lo, 0, n);
            int64_t keep_hi = std::clamp<int64_t>(i + hi + 1, keep_lo, n);
            T* d = dst + off[1];
            std::fill(d, d + keep_lo, T{});
            if (!in_place) {
              const T* s = src + off[0];
              for (int64_t j = keep_lo; j < keep_hi; ++j) d[j] = s[j * inc[0]];
            }
            std::fill(d + keep_hi, d + n, T{});
          });
    });
  });
}

void View::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (views::reinterpret(in, out)) return;
  array dense(in.shape(), in.dtype(), nullptr, {});
  cpu::copy_to_row_contiguous(in, dense);
  views::reinterpret(dense, out);
}

}  // namespace tessera
