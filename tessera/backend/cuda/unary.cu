// eval_gpu of the unary elementwise primitives: one generic kernel, templated
// on the scalar functor of backend/common/elementwise.h (the CPU kernels' own).
//
// Two cases per call: a dense input in any axis order (one linear pass with
// 16-byte loads, the output keeps the input's layout and may take over its
// buffer, see Note [Donation] in core/eval.cpp), or a strided input over
// collapsed dimensions into a row-contiguous output.
#include <string>

#include "tessera/backend/common/strided.h"
#include "tessera/backend/cuda/elementwise.cuh"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/ops/primitives/unary.h"

namespace tessera {

namespace gpu {
template <>
inline constexpr bool sign_blind<scalar::Negative> = true;
template <>
inline constexpr bool sign_blind<scalar::Square> = true;
template <>
inline constexpr bool sign_blind<scalar::BitwiseInvert> = true;
}  // namespace gpu

namespace {

using gpu::kBlock;
using gpu::kStridedWork;

// Vectors per thread and grid-stride step: kUnroll 16-byte loads in flight each.
constexpr int kUnroll = 2;

template <typename Out, typename Op, typename In>
__device__ __forceinline__ Out apply(const Op& op, In x) {
  return gpu::from_compute<Out>(op(gpu::to_compute(x)));
}

template <typename Op, typename In, typename Out, int N>
__global__ void __launch_bounds__(kBlock)
    unary_contiguous(const In* in, Out* out, int64_t n, Op op) {
  const int64_t nvec = n / N;
  const int64_t step = int64_t(gridDim.x) * kBlock * kUnroll;
  for (int64_t base = int64_t(blockIdx.x) * kBlock * kUnroll + threadIdx.x; base < nvec;
       base += step) {
    gpu::Vec<In, N> x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) x[u] = gpu::load_vec<In, N>(in, v);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) {
        gpu::Vec<Out, N> y;
#pragma unroll
        for (int k = 0; k < N; ++k) y.v[k] = apply<Out>(op, x[u].v[k]);
        gpu::store_vec<Out, N>(out, v, y);
      }
    }
  }
  if (blockIdx.x == 0) {
    int64_t i = nvec * N + threadIdx.x;
    if (i < n) out[i] = apply<Out>(op, in[i]);
  }
}

// Row-contiguous output, input through collapsed dimensions; each thread
// walks a few consecutive elements, stepping along the last dimension.
template <typename Op, typename In, typename Out>
__global__ void __launch_bounds__(kBlock)
    unary_strided(const In* in, Out* out, int64_t n, gpu::Dims<1> d, Op op) {
  int64_t i = (int64_t(blockIdx.x) * kBlock + threadIdx.x) * kStridedWork;
  if (i >= n) return;
  int64_t loc[1];
  int32_t j = gpu::locate(i, d, loc);
  const int32_t last = d.shape[d.ndim - 1];
  const int64_t inc = d.strides[0][d.ndim - 1];
#pragma unroll
  for (int k = 0; k < kStridedWork; ++k) {
    if (i >= n) break;
    out[i] = apply<Out>(op, in[loc[0]]);
    ++i;
    if (++j == last) {
      j = gpu::locate(i, d, loc);
    } else {
      loc[0] += inc;
    }
  }
}

// (op, type) pairs whose result is the input itself: the output is a view.
template <typename Op, typename T>
constexpr bool is_identity() {
  constexpr bool real = !tessera::is_complex_v<T>;
  if constexpr (std::is_same_v<Op, scalar::Floor> || std::is_same_v<Op, scalar::Ceil> ||
                std::is_same_v<Op, scalar::Trunc>) {
    return std::is_integral_v<T>;
  } else if constexpr (std::is_same_v<Op, scalar::Conjugate> || std::is_same_v<Op, scalar::Real>) {
    return real;
  } else if constexpr (std::is_same_v<Op, scalar::Abs>) {
    return std::is_unsigned_v<T>;  // and bool
  } else if constexpr (std::is_same_v<Op, scalar::Sign> || std::is_same_v<Op, scalar::Square>) {
    return std::is_same_v<T, bool>;
  } else {
    return false;
  }
}

template <typename Op, typename T>
void unary_typed(const array& in, array& out, const Op& op, const char* name, const Stream& s) {
  using HostOut = gpu::elementwise_out_t<Op, T>;
  gpu::check_out_dtype<HostOut>(out, "unary");
  if constexpr (is_identity<Op, T>()) {
    out.copy_shared_buffer(in);
    return;
  }
  using K = gpu::kernel_t<Op, T>;
  using In = gpu::device_t<K>;
  using Out = gpu::device_t<gpu::elementwise_out_t<Op, K>>;
  constexpr int N = gpu::vec_width<In, Out>;
  const In* src = static_cast<const In*>(gpu::device_ptr(in, s));
  cudaStream_t stream = gpu::cuda_stream(s);

  if (in.flags().contiguous && gpu::aligned(src, sizeof(In) * N)) {
    const int64_t n = static_cast<int64_t>(in.data_size());
    Out* dst = (std::is_same_v<T, HostOut> && in.is_donatable())
                   ? gpu::donate<Out>(out, in, s)
                   : gpu::allocate_like<Out>(out, in, s);
    unsigned grid = gpu::grid_size(n / N, int64_t(kBlock) * kUnroll, s);
    unary_contiguous<Op, In, Out, N><<<grid, kBlock, 0, stream>>>(src, dst, n, op);
    gpu::check_launch(name);
    return;
  }

  Out* dst = gpu::allocate_output<Out>(out, s);
  auto [shape, strides] = tessera::collapse_contiguous_dims(in.shape(), {in.strides()});
  const int64_t n = static_cast<int64_t>(out.size());
  unary_strided<Op, In, Out><<<gpu::strided_grid(n), kBlock, 0, stream>>>(
      src, dst, n, gpu::make_dims<1>(shape, strides), op);
  gpu::check_launch(name);
}

// Dispatches once on the input dtype; see Note [Supported types] in
// backend/common/elementwise.h.
template <typename Op>
void unary_op(const array& in, array& out, const Op& op, const Primitive& p) {
  gpu::dispatch_elementwise<Op>(in.dtype(), out, p, [&](auto tag) {
    unary_typed<Op, typename decltype(tag)::type>(in, out, op, p.name(), p.stream());
  });
}

}  // namespace

#define TESSERA_EVAL eval_gpu
#include "tessera/backend/common/unary_eval.inc"
#undef TESSERA_EVAL

}  // namespace tessera
