// eval_cpu of Convolution, as matrix products (backend/common/conv_plan.h):
// the window matrices of a chunk of output rows are gathered from the input
// (any strides) in the compute dtype, float32 for float16 and bfloat16, then
// each group's is multiplied with the weight by one BLAS GEMM, written straight
// into the output's rows (16-bit floats through a float32 chunk).

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/backend/common/conv_plan.h"
#include "tessera/backend/cpu/blas.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/convolution.h"

namespace tessera {

namespace {

constexpr size_t kWindowBytes = size_t(32) << 20;

// The window matrices of rows [r0, r0 + count), as (groups, count, cols).
template <typename T, typename A>
void gather_windows(const ConvPlan& p, const T* x, int64_t r0, int64_t count, A* windows) {
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(p.groups * p.cols, 1));
  cpu::parallel_for(count, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t tap = 0; tap < p.taps; ++tap) {
        const int64_t offset = window_offset(p, r0 + r, tap);
        for (int64_t g = 0; g < p.groups; ++g) {
          A* dst = windows + (g * count + r) * p.cols + tap * p.in_group;
          if (offset < 0) {
            std::fill(dst, dst + p.in_group, A(0));
            continue;
          }
          const T* src = x + offset + g * p.in_group * p.channel_stride;
          if (p.channel_stride == 1) {
            for (int64_t c = 0; c < p.in_group; ++c) dst[c] = tessera::cast_to<A>(src[c]);
          } else {
            for (int64_t c = 0; c < p.in_group; ++c) {
              dst[c] = tessera::cast_to<A>(src[c * p.channel_stride]);
            }
          }
        }
      }
    }
  });
}

template <typename T>
void convolve(const ConvPlan& p, const array& x, const array& w, array& out) {
  using A = tessera::compute_t<T>;
  constexpr bool direct = std::is_same_v<A, T>;
  const int64_t O = p.out_channels;
  const int64_t chunk = chunk_rows(p, sizeof(A), kWindowBytes);
  if (chunk > INT_MAX || O > INT_MAX || p.cols > INT_MAX) {
    throw std::runtime_error("[Convolution] the window matrix is too large for BLAS (" +
                             std::to_string(p.cols) + " columns)");
  }
  // The weight as (O, cols) rows of A.
  const array dense = cpu::ensure_row_contiguous(w);
  std::unique_ptr<A[]> cast_weight;
  const A* weight;
  if constexpr (direct) {
    weight = dense.data<T>();
  } else {
    cast_weight.reset(new A[dense.size()]);
    cpu::cast_contiguous(dense.data<T>(), w.dtype(), cast_weight.get(), float32, dense.size());
    weight = cast_weight.get();
  }
  std::unique_ptr<A[]> windows(new A[p.groups * chunk * p.cols]);
  std::unique_ptr<A[]> staging(direct ? nullptr : new A[chunk * O]);
  T* y = out.data<T>();
  const T* in = x.data<T>();
  for (int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const int64_t count = std::min(chunk, p.rows - r0);
    gather_windows(p, in, r0, count, windows.get());
    A* dst;
    if constexpr (direct) {
      dst = y + r0 * O;
    } else {
      dst = staging.get();
    }
    for (int64_t g = 0; g < p.groups; ++g) {
      // dst's rows (stride O) = windows @ weight^T, this group's
      cpu::gemm<A>(false, true, count, p.out_group, p.cols, A(1),
                   windows.get() + g * count * p.cols, p.cols,
                   weight + g * p.out_group * p.cols, p.cols, A(0), dst + g * p.out_group, O);
    }
    if constexpr (!direct) {
      cpu::cast_contiguous(staging.get(), float32, y + r0 * O, out.dtype(), count * O);
    }
  }
}

}  // namespace

void Convolution::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& x = inputs[0];
  const array& w = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const ConvPlan p = conv_plan(*this, x, w);
  if (p.cols == 0) {
    std::memset(out.raw_data(), 0, out.nbytes());
    return;
  }
  cpu::blas_init();
  tessera::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (tessera::is_float_v<T>) {
      convolve<T>(p, x, w, out);
    } else {
      throw std::logic_error("[Convolution] needs a floating-point dtype (bug in the caller)");
    }
  });
}

}  // namespace tessera
