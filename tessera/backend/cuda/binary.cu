// eval_gpu of the binary elementwise primitives: one generic kernel, templated
// on the scalar functor of backend/common/elementwise.h (the CPU kernels' own),
// plus Select, AllTrue and DivMod.
//
// The kernel picks one case per call, as the CPU one does:
//   scalar-scalar, scalar-vector, vector-scalar, vector-vector (dense inputs of
//     one layout): one linear pass with 16-byte loads;
//   dense and row: (M, N) + (N,) with the other input dense: one linear pass
//     with 16-byte loads, the row read at each vector's column;
//   rows: two collapsed dimensions whose last is contiguous or broadcast in
//     each input, e.g. (M, N) * (M, 1): 16-byte loads along rows, a
//     broadcast row loaded once per thread and reused down the rows;
//   general strided: collapsed dimensions, row-contiguous output.
// A dense input used for the last time donates its buffer to the output (see
// Note [Donation] in core/eval.cpp).
#include <cstring>
#include <optional>
#include <string>

#include "tessera/backend/common/strided.h"
#include "tessera/backend/cuda/elementwise.cuh"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/ops/primitives/binary.h"

namespace tessera {

namespace gpu {
#define TESSERA_SIGN_BLIND(NAME) \
  template <>                    \
  inline constexpr bool sign_blind<scalar::NAME> = true;
TESSERA_SIGN_BLIND(Add)
TESSERA_SIGN_BLIND(Subtract)
TESSERA_SIGN_BLIND(Multiply)
TESSERA_SIGN_BLIND(BitwiseAnd)
TESSERA_SIGN_BLIND(BitwiseOr)
TESSERA_SIGN_BLIND(BitwiseXor)
TESSERA_SIGN_BLIND(LeftShift)
TESSERA_SIGN_BLIND(Equal)
TESSERA_SIGN_BLIND(EqualNan)
TESSERA_SIGN_BLIND(NotEqual)
#undef TESSERA_SIGN_BLIND

// The ops and element types the tiny-op kernel runs (Note [Tiny ops]).
template <typename Op>
inline constexpr std::optional<TinyCode> tiny_code = std::nullopt;
template <typename T>
inline constexpr std::optional<TinyType> tiny_type = std::nullopt;
#define TESSERA_TINY_CODE(OP, CODE) \
  template <>                        \
  inline constexpr std::optional<TinyCode> tiny_code<scalar::OP> = TinyCode::CODE;
TESSERA_TINY_CODE(Add, add)
TESSERA_TINY_CODE(Subtract, subtract)
TESSERA_TINY_CODE(Multiply, multiply)
TESSERA_TINY_CODE(Divide, divide)
TESSERA_TINY_CODE(Maximum, maximum)
TESSERA_TINY_CODE(Minimum, minimum)
#undef TESSERA_TINY_CODE
#define TESSERA_TINY_TYPE(T, TYPE) \
  template <>                       \
  inline constexpr std::optional<TinyType> tiny_type<T> = TinyType::TYPE;
TESSERA_TINY_TYPE(float, f32)
TESSERA_TINY_TYPE(__half, f16)
TESSERA_TINY_TYPE(__nv_bfloat16, bf16)
TESSERA_TINY_TYPE(double, f64)
TESSERA_TINY_TYPE(int32_t, i32)
TESSERA_TINY_TYPE(uint32_t, u32)
TESSERA_TINY_TYPE(int64_t, i64)
TESSERA_TINY_TYPE(uint64_t, u64)
#undef TESSERA_TINY_TYPE

}  // namespace gpu

namespace {

using gpu::kBlock;
using gpu::kStridedWork;

// Vectors per thread and grid-stride step: kUnroll 16-byte loads of each
// input in flight.
constexpr int kUnroll = 2;
// Rows per thread and step in the rows kernel.
constexpr int kRowUnroll = 4;

using gpu::apply;

template <typename Op, typename In, typename Out, int N>
__device__ __forceinline__ gpu::Vec<Out, N> apply_vec(const Op& op, const gpu::Vec<In, N>& a,
                                                      const gpu::Vec<In, N>& b) {
  gpu::Vec<Out, N> r;
#pragma unroll
  for (int k = 0; k < N; ++k) r.v[k] = apply<Out>(op, a.v[k], b.v[k]);
  return r;
}

// Dense inputs of one layout, either of which may be a single element: at
// its address, or passed by value (a null address; Note [Scalar operands on
// the GPU]).
template <typename Op, typename In, typename Out, int N>
__global__ void __launch_bounds__(kBlock)
    binary_contiguous(const In* a, const In* b, Out* out, int64_t n, bool a_scalar,
                      bool b_scalar, In a_value, In b_value, Op op) {
  const int64_t nvec = n / N;
  gpu::Vec<In, N> sa, sb;
  if (a_scalar) sa = gpu::splat<In, N>(a ? a[0] : a_value);
  if (b_scalar) sb = gpu::splat<In, N>(b ? b[0] : b_value);
  const int64_t step = int64_t(gridDim.x) * kBlock * kUnroll;
  for (int64_t base = int64_t(blockIdx.x) * kBlock * kUnroll + threadIdx.x; base < nvec;
       base += step) {
    gpu::Vec<In, N> va[kUnroll], vb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) {
        va[u] = a_scalar ? sa : gpu::load_vec<In, N>(a, v);
        vb[u] = b_scalar ? sb : gpu::load_vec<In, N>(b, v);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) gpu::store_vec<Out, N>(out, v, apply_vec<Op, In, Out, N>(op, va[u], vb[u]));
    }
  }
  if (blockIdx.x == 0) {
    int64_t i = nvec * N + threadIdx.x;
    if (i < n) out[i] = apply<Out>(op, a_scalar ? sa.v[0] : a[i], b_scalar ? sb.v[0] : b[i]);
  }
}

// One input of the rows kernel: element (r, c) is p[r * row_stride + c] when
// `inner`, else p[r * row_stride] (a row-broadcast scalar). row_stride 0
// broadcasts a row down the rows.
template <typename T>
struct RowOperand {
  const T* p;
  int64_t row_stride;
  bool inner;
};

template <typename T, int N>
__device__ __forceinline__ gpu::Vec<T, N> load_row(const RowOperand<T>& x, int64_t r,
                                                   int64_t col_vec) {
  const T* row = x.p + r * x.row_stride;
  return x.inner ? gpu::load_vec<T, N>(row, col_vec) : gpu::splat<T, N>(row[0]);
}

// out (rows x cols, row-contiguous) = op(a, b); cols % N == 0. Threads of a
// block cover blockDim.x column vectors of blockDim.y rows; each thread steps
// down the rows, kRowUnroll rows at a time.
template <typename Op, typename In, typename Out, int N>
__global__ void __launch_bounds__(kBlock)
    binary_rows(RowOperand<In> a, RowOperand<In> b, Out* out, int64_t rows, int64_t cols, Op op) {
  const int64_t cvecs = cols / N;
  const int64_t cv = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (cv >= cvecs) return;
  const bool a_fixed = a.row_stride == 0, b_fixed = b.row_stride == 0;
  gpu::Vec<In, N> fa, fb;
  if (a_fixed) fa = load_row<In, N>(a, 0, cv);
  if (b_fixed) fb = load_row<In, N>(b, 0, cv);
  const int64_t step = int64_t(gridDim.y) * blockDim.y;
  for (int64_t r0 = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r0 < rows;
       r0 += step * kRowUnroll) {
    gpu::Vec<In, N> va[kRowUnroll], vb[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      int64_t r = r0 + u * step;
      if (r < rows) {
        va[u] = a_fixed ? fa : load_row<In, N>(a, r, cv);
        vb[u] = b_fixed ? fb : load_row<In, N>(b, r, cv);
      }
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      int64_t r = r0 + u * step;
      if (r < rows) {
        gpu::store_vec<Out, N>(out + r * cols, cv, apply_vec<Op, In, Out, N>(op, va[u], vb[u]));
      }
    }
  }
}

// out (rows x cols, dense) = op(a, b), one input dense of out's layout and the
// other one row broadcast down the rows ((M, N) + (N,)); cols % N == 0. Walks
// out as a flat run of vectors, like binary_contiguous, reading the row at
// the vector's column. Faster than binary_rows for this case: one streaming
// input, a single index, and no registers for a second pattern ((8192,
// 32768) + (32768,) on an H200: 4.22 TB/s standalone against 4.16).
template <typename Op, typename In, typename Out, int N>
__global__ void __launch_bounds__(kBlock)
    binary_dense_row(const In* a, const In* b, Out* out, int64_t nvec, int64_t cvecs, bool a_row,
                     Op op) {
  const In* dense = a_row ? b : a;
  const In* row = a_row ? a : b;
  const bool narrow = nvec <= INT32_MAX;
  const int64_t step = int64_t(gridDim.x) * kBlock * kUnroll;
  for (int64_t base = int64_t(blockIdx.x) * kBlock * kUnroll + threadIdx.x; base < nvec;
       base += step) {
    gpu::Vec<In, N> vd[kUnroll], vr[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) {
        int64_t c = narrow ? int64_t(uint32_t(v) % uint32_t(cvecs)) : v % cvecs;
        vd[u] = gpu::load_vec<In, N>(dense, v);
        vr[u] = gpu::load_vec<In, N>(row, c);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) {
        gpu::store_vec<Out, N>(out, v,
                               a_row ? apply_vec<Op, In, Out, N>(op, vr[u], vd[u])
                                     : apply_vec<Op, In, Out, N>(op, vd[u], vr[u]));
      }
    }
  }
}

// Row-contiguous output, inputs through collapsed dimensions; each thread
// walks a few consecutive elements, stepping along the last dimension.
template <typename Op, typename In, typename Out>
__global__ void __launch_bounds__(kBlock)
    binary_strided(const In* a, const In* b, Out* out, int64_t n, gpu::Dims<2> d, Op op) {
  int64_t i = (int64_t(blockIdx.x) * kBlock + threadIdx.x) * kStridedWork;
  if (i >= n) return;
  int64_t loc[2];
  int32_t j = gpu::locate(i, d, loc);
  const int nd = d.ndim - 1;
  const int32_t last = d.shape[nd];
  const int64_t inc_a = d.strides[0][nd], inc_b = d.strides[1][nd];
#pragma unroll
  for (int k = 0; k < kStridedWork; ++k) {
    if (i >= n) break;
    out[i] = apply<Out>(op, a[loc[0]], b[loc[1]]);
    ++i;
    if (++j == last) {
      j = gpu::locate(i, d, loc);
    } else {
      loc[0] += inc_a;
      loc[1] += inc_b;
    }
  }
}

template <typename Op, typename T>
void binary_typed(const array& a, const array& b, array& out, const Op& op, const char* name,
                  bool donate, const Stream& s) {
  using HostOut = gpu::elementwise_out_t<Op, T, T>;
  gpu::check_out_dtype<HostOut>(out, "binary");
  using K = gpu::kernel_t<Op, T>;
  using In = gpu::device_t<K>;
  using Out = gpu::device_t<gpu::elementwise_out_t<Op, K, K>>;
  constexpr int N = gpu::vec_width<In, Out>;
  constexpr size_t kAlign = sizeof(In) * N;
  static_assert(sizeof(In) == sizeof(T), "host and device elements have one size");
  // Note [Scalar operands on the GPU]
  // An operand of one element whose host copy is valid (a cached scalar
  // operand, Note [Scalar operands] in core/array.h, or any scalar made on the
  // host) is read on the host and passed to the kernel by value: no upload,
  // no event and no residency work for it. The contiguous cases take it so
  // (the tiny-op batch carries it in the op, binary_contiguous as an
  // argument); the others ask for its device copy.
  const bool a_scalar = a.data_size() == 1, b_scalar = b.data_size() == 1;
  In va{}, vb{};
  const bool a_value = a_scalar && gpu::host_scalar(a, &va);
  const bool b_value = b_scalar && gpu::host_scalar(b, &vb);
  const In* pa = a_value ? nullptr : static_cast<const In*>(gpu::device_ptr(a, s));
  const In* pb = b_value ? nullptr : static_cast<const In*>(gpu::device_ptr(b, s));
  auto donor = [&](const array& x) {
    return std::is_same_v<T, HostOut> && donate && x.is_donatable();
  };
  auto contiguous = [&](Out* o, int64_t n, bool a_one, bool b_one) {
    if constexpr (std::is_same_v<In, Out> && gpu::tiny_code<Op> && gpu::tiny_type<In>) {
      if (n <= gpu::kTinyMax) {
        auto operand = [](const In* p, const In& value, bool scalar, gpu::TinyMode& mode) {
          gpu::TinyOperand x{};
          if (p) {
            x.ptr = p;
            mode = scalar ? gpu::TinyMode::scalar : gpu::TinyMode::vector;
          } else {
            std::memcpy(&x.bits, &value, sizeof(In));
            mode = gpu::TinyMode::value;
          }
          return x;
        };
        gpu::TinyOp t{};
        t.a = operand(pa, va, a_one, t.a_mode);
        t.b = operand(pb, vb, b_one, t.b_mode);
        t.out = o;
        t.n = static_cast<int32_t>(n);
        t.code = *gpu::tiny_code<Op>;
        t.type = *gpu::tiny_type<In>;
        gpu::enqueue_tiny(s, t);
        return;
      }
    }
    unsigned grid = gpu::grid_size(n / N, int64_t(kBlock) * kUnroll, s);
    binary_contiguous<Op, In, Out, N><<<grid, kBlock, 0, gpu::cuda_stream(s)>>>(
        pa, pb, o, n, a_one, b_one, va, vb, op);
    gpu::check_launch(name);
  };

  const bool a_dense = a.flags().contiguous && gpu::aligned(pa, kAlign);
  const bool b_dense = b.flags().contiguous && gpu::aligned(pb, kAlign);
  if (a_scalar && b_scalar) {
    // An operand passed by value has no device copy to take over.
    Out* o = !a_value && donor(a) ? gpu::donate<Out>(out, a, s)
             : !b_value && donor(b)
                 ? gpu::donate<Out>(out, b, s)
                 : static_cast<Out*>(gpu::allocate_output(out, s, 1, a.strides(), a.flags()));
    return contiguous(o, 1, true, true);
  }
  if (a_scalar && b_dense) {
    Out* o = donor(b) ? gpu::donate<Out>(out, b, s) : gpu::allocate_like<Out>(out, b, s);
    return contiguous(o, static_cast<int64_t>(b.data_size()), true, false);
  }
  if (a_dense && b_scalar) {
    Out* o = donor(a) ? gpu::donate<Out>(out, a, s) : gpu::allocate_like<Out>(out, a, s);
    return contiguous(o, static_cast<int64_t>(a.data_size()), false, true);
  }
  if (a_dense && b_dense && a.strides() == b.strides()) {
    Out* o = donor(a)   ? gpu::donate<Out>(out, a, s)
             : donor(b) ? gpu::donate<Out>(out, b, s)
                        : gpu::allocate_like<Out>(out, a, s);
    return contiguous(o, static_cast<int64_t>(a.data_size()), false, false);
  }
  if (!pa) pa = static_cast<const In*>(gpu::device_ptr(a, s));
  if (!pb) pb = static_cast<const In*>(gpu::device_ptr(b, s));

  // Row-contiguous output over collapsed dimensions.
  Out* o = (a.flags().row_contiguous && donor(a))   ? gpu::donate<Out>(out, a, s)
           : (b.flags().row_contiguous && donor(b)) ? gpu::donate<Out>(out, b, s)
                                                    : gpu::allocate_output<Out>(out, s);
  auto [shape, strides] = tessera::collapse_contiguous_dims(out.shape(), {a.strides(), b.strides()});
  const int64_t n = static_cast<int64_t>(out.size());

  auto row_operand = [&](const In* p, const Strides& st, RowOperand<In>& x) {
    if (st[1] != 0 && st[1] != 1) return false;
    x = {p, st[0], st[1] == 1};
    return !x.inner || (st[0] % N == 0 && gpu::aligned(p, kAlign));
  };
  RowOperand<In> ra, rb;
  if (shape.size() == 2 && shape[1] % N == 0 && gpu::aligned(o, sizeof(Out) * N) &&
      row_operand(pa, strides[0], ra) && row_operand(pb, strides[1], rb)) {
    const int64_t rows = shape[0], cols = shape[1], cvecs = cols / N;
    auto dense = [&](const RowOperand<In>& x) { return x.inner && x.row_stride == cols; };
    auto row = [&](const RowOperand<In>& x) { return x.inner && x.row_stride == 0; };
    if ((dense(ra) && row(rb)) || (row(ra) && dense(rb))) {
      const int64_t nvec = rows * cvecs;
      binary_dense_row<Op, In, Out, N>
          <<<gpu::grid_size(nvec, int64_t(kBlock) * kUnroll, s), kBlock, 0,
             gpu::cuda_stream(s)>>>(pa, pb, o, nvec, cvecs, row(ra), op);
      gpu::check_launch(name);
      return;
    }
    unsigned bx = 1;
    while (bx < kBlock && bx < cvecs) bx *= 2;
    const unsigned by = kBlock / bx;
    const int64_t gx = (cvecs + bx - 1) / bx;
    // Blocks over the rows: a thread reuses a broadcast row from registers
    // for kRowUnroll rows at a time; more rows per thread only cost
    // bandwidth ((8192, 32768) + (32768,) on an H200: 4.15 TB/s with one
    // step per thread, 3.90 with 16 blocks per multiprocessor).
    const int64_t target = int64_t(gpu::properties(s.device.index).multiProcessorCount) * 4096;
    int64_t gy = std::min<int64_t>((rows + by * kRowUnroll - 1) / (by * kRowUnroll),
                                   std::max<int64_t>(1, target / gx));
    gy = std::min<int64_t>(gy, 65535);
    dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
    binary_rows<Op, In, Out, N>
        <<<grid, dim3(bx, by), 0, gpu::cuda_stream(s)>>>(ra, rb, o, rows, cols, op);
    gpu::check_launch(name);
    return;
  }

  binary_strided<Op, In, Out><<<gpu::strided_grid(n), kBlock, 0, gpu::cuda_stream(s)>>>(
      pa, pb, o, n, gpu::make_dims<2>(shape, strides), op);
  gpu::check_launch(name);
}

// Dispatches once on the (common) input dtype; see Note [Supported types] in
// backend/common/elementwise.h.
template <typename Op>
void binary_op(const array& a, const array& b, array& out, const Op& op, const Primitive& p,
               bool donate = true) {
  gpu::dispatch_elementwise<Op>(a.dtype(), out, p, [&](auto tag) {
    binary_typed<Op, typename decltype(tag)::type>(a, b, out, op, p.name(), donate, p.stream());
  });
}

// ---- Select -------------------------------------------------------------------

// condition ? x : y over dense operands of one layout; moves bytes only.
template <typename T, int N>
__global__ void __launch_bounds__(kBlock)
    select_contiguous(const bool* c, const T* x, const T* y, T* out, int64_t n) {
  const int64_t nvec = n / N;
  const int64_t step = int64_t(gridDim.x) * kBlock * kUnroll;
  for (int64_t base = int64_t(blockIdx.x) * kBlock * kUnroll + threadIdx.x; base < nvec;
       base += step) {
    gpu::Vec<bool, N> vc[kUnroll];
    gpu::Vec<T, N> vx[kUnroll], vy[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) {
        vc[u] = gpu::load_vec<bool, N>(c, v);
        vx[u] = gpu::load_vec<T, N>(x, v);
        vy[u] = gpu::load_vec<T, N>(y, v);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = base + u * kBlock;
      if (v < nvec) {
        gpu::Vec<T, N> r;
#pragma unroll
        for (int k = 0; k < N; ++k) r.v[k] = vc[u].v[k] ? vx[u].v[k] : vy[u].v[k];
        gpu::store_vec<T, N>(out, v, r);
      }
    }
  }
  if (blockIdx.x == 0) {
    int64_t i = nvec * N + threadIdx.x;
    if (i < n) out[i] = c[i] ? x[i] : y[i];
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    select_strided(const bool* c, const T* x, const T* y, T* out, int64_t n, gpu::Dims<3> d) {
  int64_t i = (int64_t(blockIdx.x) * kBlock + threadIdx.x) * kStridedWork;
  if (i >= n) return;
  int64_t loc[3];
  int32_t j = gpu::locate(i, d, loc);
  const int nd = d.ndim - 1;
  const int32_t last = d.shape[nd];
#pragma unroll
  for (int k = 0; k < kStridedWork; ++k) {
    if (i >= n) break;
    out[i] = c[loc[0]] ? x[loc[1]] : y[loc[2]];
    ++i;
    if (++j == last) {
      j = gpu::locate(i, d, loc);
    } else {
#pragma unroll
      for (int q = 0; q < 3; ++q) loc[q] += d.strides[q][nd];
    }
  }
}

template <typename T>
void select_typed(const array& c, const array& x, const array& y, array& out, const char* name,
                  const Stream& s) {
  constexpr int N = gpu::vec_width<T>;
  const bool* pc = static_cast<const bool*>(gpu::device_ptr(c, s));
  const T* px = static_cast<const T*>(gpu::device_ptr(x, s));
  const T* py = static_cast<const T*>(gpu::device_ptr(y, s));
  cudaStream_t stream = gpu::cuda_stream(s);
  bool dense = c.flags().contiguous && x.flags().contiguous && y.flags().contiguous &&
               c.strides() == x.strides() && x.strides() == y.strides() &&
               gpu::aligned(pc, N) && gpu::aligned(px, sizeof(T) * N) &&
               gpu::aligned(py, sizeof(T) * N);
  if (dense) {
    T* o = x.is_donatable()   ? gpu::donate<T>(out, x, s)
           : y.is_donatable() ? gpu::donate<T>(out, y, s)
                              : gpu::allocate_like<T>(out, x, s);
    const int64_t n = static_cast<int64_t>(x.data_size());
    unsigned grid = gpu::grid_size(n / N, int64_t(kBlock) * kUnroll, s);
    select_contiguous<T, N><<<grid, kBlock, 0, stream>>>(pc, px, py, o, n);
    gpu::check_launch(name);
    return;
  }
  T* o = gpu::allocate_output<T>(out, s);
  auto [shape, strides] =
      tessera::collapse_contiguous_dims(out.shape(), {c.strides(), x.strides(), y.strides()});
  const int64_t n = static_cast<int64_t>(out.size());
  select_strided<T><<<gpu::strided_grid(n), kBlock, 0, stream>>>(
      pc, px, py, o, n, gpu::make_dims<3>(shape, strides));
  gpu::check_launch(name);
}

// ---- AllTrue ------------------------------------------------------------------

// *out starts true; a thread that sees a false element clears it (all writers
// store the same value, so the race is benign).
__global__ void __launch_bounds__(kBlock)
    all_true_contiguous(const uint8_t* p, int64_t n, bool* out) {
  const int64_t nvec = n / 16;
  bool all = true;
  for (int64_t v = int64_t(blockIdx.x) * kBlock + threadIdx.x; v < nvec;
       v += int64_t(gridDim.x) * kBlock) {
    uint4 w = reinterpret_cast<const uint4*>(p)[v];
    const uint32_t zero_bytes = ((w.x - 0x01010101u) & ~w.x) | ((w.y - 0x01010101u) & ~w.y) |
                                ((w.z - 0x01010101u) & ~w.z) | ((w.w - 0x01010101u) & ~w.w);
    all = all && (zero_bytes & 0x80808080u) == 0;
  }
  if (blockIdx.x == 0) {
    int64_t i = nvec * 16 + threadIdx.x;
    if (i < n) all = all && p[i] != 0;
  }
  if (!__syncthreads_and(all) && threadIdx.x == 0) *out = false;
}

__global__ void __launch_bounds__(kBlock)
    all_true_strided(const uint8_t* p, int64_t n, gpu::Dims<1> d, bool* out) {
  const int64_t i = int64_t(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= n) return;
  int64_t loc[1];
  gpu::locate(i, d, loc);
  if (p[loc[0]] == 0) *out = false;
}

}  // namespace

#define TESSERA_EVAL eval_gpu
#include "tessera/backend/common/binary_eval.inc"
#undef TESSERA_EVAL

void Select::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (out.size() == 0) {
    gpu::allocate_output(out, stream());
    return;
  }
  tessera::dispatch_bytes(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    select_typed<T>(inputs[0], inputs[1], inputs[2], out, name(), stream());
  });
}

void AllTrue::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  const Stream& s = stream();
  cudaStream_t cs = gpu::cuda_stream(s);
  bool* o = gpu::allocate_output<bool>(out, s);
  TESSERA_CUDA_CHECK(cudaMemsetAsync(o, 1, sizeof(bool), cs));
  if (in.size() == 0) return;
  const uint8_t* p = static_cast<const uint8_t*>(gpu::device_ptr(in, s));
  if ((in.flags().contiguous || in.data_size() == 1) && gpu::aligned(p, 16)) {
    const int64_t n = static_cast<int64_t>(in.data_size());
    unsigned grid = gpu::grid_size(n / 16, kBlock, s);
    all_true_contiguous<<<grid, kBlock, 0, cs>>>(p, n, o);
  } else {
    auto [shape, strides] = tessera::collapse_contiguous_dims(in.shape(), {in.strides()});
    const int64_t n = static_cast<int64_t>(in.size());
    unsigned grid = static_cast<unsigned>((n + kBlock - 1) / kBlock);
    all_true_strided<<<grid, kBlock, 0, cs>>>(p, n, gpu::make_dims<1>(shape, strides), o);
  }
  gpu::check_launch(name());
}

}  // namespace tessera
