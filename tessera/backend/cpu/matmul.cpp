// eval_cpu of Matmul and AddMM: batched GEMM through OpenBLAS.
//
// Operands are read in place whenever their last two axes are row- or
// column-contiguous (a column-contiguous matrix is passed as CblasTrans with its
// leading dimension taken from the strides); batch elements are found through
// the batch strides, so broadcast batch axes (stride 0) cost nothing. Anything
// else, and float16 / bfloat16 (computed in float32), is copied once into a
// compact buffer that keeps broadcast batch axes unexpanded, except for a
// product of few rows by a half-precision matrix with contiguous rows (Note
// [Half-precision GEMV] in backend/cpu/vector_math.h).
#include "tessera/backend/cpu/cblas.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "tessera/backend/cpu/blas.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/common/views.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/backend/cpu/vector_math.h"
#include "tessera/ops/primitives/matmul.h"

namespace tessera {

namespace {

// Element (i, k) of batch element b is at data + batch_loc(b) + i * row + k * col
// (in elements).
struct Operand {
  array holder;  // the input itself, or the compact copy it was read from
  const void* data;
  Strides batch_strides;
  int64_t row, col;
};

// The dtype the product is computed in.
Dtype compute_dtype(Dtype t) { return (t == float16 || t == bfloat16) ? float32 : t; }

bool is_blas_dtype(Dtype t) { return t == float32 || t == float64 || t == complex64; }

// How BLAS reads an R x C matrix with strides (row, col), if it can.
bool blas_layout(int64_t R, int64_t C, int64_t row, int64_t col, CBLAS_TRANSPOSE& trans,
                 int64_t& ld) {
  if ((col == 1 || C == 1) && (R == 1 || row >= std::max<int64_t>(C, 1))) {
    trans = CblasNoTrans;
    ld = R == 1 ? std::max<int64_t>(C, 1) : row;
    return ld <= INT_MAX;
  }
  if ((row == 1 || R == 1) && (C == 1 || col >= std::max<int64_t>(R, 1))) {
    trans = CblasTrans;
    ld = C == 1 ? std::max<int64_t>(R, 1) : col;
    return ld <= INT_MAX;
  }
  return false;
}

Operand prepare(const array& x, Dtype compute) {
  const int nd = static_cast<int>(x.ndim());
  const int64_t R = x.shape(nd - 2), C = x.shape(nd - 1);
  const int64_t row = x.strides()[nd - 2], col = x.strides()[nd - 1];
  CBLAS_TRANSPOSE trans;
  int64_t ld;
  if (x.dtype() == compute && (!is_blas_dtype(compute) || blas_layout(R, C, row, col, trans, ld))) {
    Strides batch(x.strides().begin(), x.strides().end() - 2);
    return {x, x.raw_data(), std::move(batch), row, col};
  }
  // Compact copy; broadcast batch axes stay of extent 1 (and stride 0).
  Shape shape = x.shape();
  for (int d = 0; d < nd - 2; ++d) {
    if (x.strides()[d] == 0) shape[d] = 1;
  }
  array v(shape, x.dtype(), nullptr, {});
  v.copy_shared_buffer(x, x.strides(), compute_flags(shape, x.strides()),
                       compute_data_size(shape, x.strides()));
  array dense(shape, compute, nullptr, {});
  cpu::copy_to_row_contiguous(v, dense);
  Strides rs = row_major_strides(shape);
  Strides batch(nd - 2);
  for (int d = 0; d < nd - 2; ++d) batch[d] = shape[d] == 1 ? 0 : rs[d];
  return {dense, dense.raw_data(), std::move(batch), C, 1};
}

template <typename T>
void naive_gemm(const T* a, int64_t ar, int64_t ac, const T* b, int64_t br, int64_t bc, T* c,
                int64_t M, int64_t N, int64_t K) {
  int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(N * K, 1));
  cpu::parallel_for(M, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        T acc{};
        for (int64_t k = 0; k < K; ++k) {
          if constexpr (std::is_same_v<T, bool>) {
            acc = acc || (a[i * ar + k * ac] && b[k * br + j * bc]);
          } else {
            acc += a[i * ar + k * ac] * b[k * br + j * bc];
          }
        }
        c[i * N + j] = acc;
      }
    }
  });
}

// target (row-contiguous, dtype T) = alpha (a @ b) + beta target, every batch element.
// With accumulate false, target is overwritten (beta = 0).
template <typename T>
void batched_gemm(const Operand& a, const Operand& b, array& target, int64_t M, int64_t N,
                  int64_t K, float alpha, float beta, bool accumulate) {
  const Shape batch_shape(target.shape().begin(), target.shape().end() - 2);
  const int64_t batches = static_cast<int64_t>(target.size()) / (M * N);
  T* out = target.data<T>();
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  if (!accumulate) beta = 0.f;

  CBLAS_TRANSPOSE ta = CblasNoTrans, tb = CblasNoTrans;
  int64_t lda = 0, ldb = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, complex64_t>) {
    blas_layout(M, K, a.row, a.col, ta, lda);
    blas_layout(K, N, b.row, b.col, tb, ldb);
  }
  auto product = [&](int64_t bi) {
    const T* A = pa + tessera::elem_to_loc(bi, batch_shape, a.batch_strides);
    const T* B = pb + tessera::elem_to_loc(bi, batch_shape, b.batch_strides);
    T* C = out + bi * M * N;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, complex64_t>) {
      cpu::gemm<T>(ta == CblasTrans, tb == CblasTrans, M, N, K, T(alpha), A, lda, B, ldb,
                   T(beta), C, N);
    } else if constexpr (tessera::is_integral_v<T> || std::is_same_v<T, bool>) {
      if (alpha != 1.f || beta != 0.f) {
        throw std::logic_error("[Matmul] alpha and beta need an inexact dtype (bug)");
      }
      naive_gemm(A, a.row, a.col, B, b.row, b.col, C, M, N, K);
    } else {
      throw std::logic_error("[Matmul] 16-bit floats are computed in float32 (bug)");
    }
  };
  // Enough products for every thread: one product per thread at a time
  // (Note [One pool for BLAS]); else each product is cut into parts.
  if (batches >= 2 * cpu::num_threads()) {
    cpu::parallel_for(batches, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t bi = b0; bi < b1; ++bi) product(bi);
    });
  } else {
    for (int64_t bi = 0; bi < batches; ++bi) product(bi);
  }
}

// target = beta * target (zeros when beta is 0).
void scale(array& target, float beta) {
  if (beta == 1.f) return;
  if (beta == 0.f) {
    std::memset(target.raw_data(), 0, target.nbytes());
    return;
  }
  tessera::dispatch_all(target.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || tessera::is_complex_v<T>) {
      T* p = target.data<T>();
      for (size_t i = 0; i < target.size(); ++i) p[i] *= beta;
    } else {
      throw std::logic_error("[AddMM] needs an inexact dtype (bug in the caller)");
    }
  });
}

void run_gemm(const array& a_in, const array& b_in, array& target, int64_t M, int64_t N,
              int64_t K, float alpha, float beta, bool accumulate) {
  const Dtype compute = target.dtype();
  Operand a = prepare(a_in, compute);
  Operand b = prepare(b_in, compute);
  tessera::dispatch_all(compute, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (tessera::is_half_v<T>) {
      throw std::logic_error("[Matmul] 16-bit floats are computed in float32 (bug)");
    } else {
      batched_gemm<T>(a, b, target, M, N, K, alpha, beta, accumulate);
    }
  });
}

// Note [Half-precision GEMV] (backend/cpu/vector_math.h): a @ b for a float16
// or bfloat16 b of two dimensions whose columns are contiguous (w.T of a
// row-major w) and at most kHalfGemvRows rows of a in all. Converting b to
// float32 for OpenBLAS wrote and read every weight twice more: a 1 x 2048 by
// 2048 x 8192 bfloat16 product took 16.5 ms here, 2 GB/s of weights.
constexpr int64_t kHalfGemvRows = 4;

bool half_gemv_applies(const array& a, const array& b, const array& out) {
  const Dtype t = out.dtype();
  if ((t != float16 && t != bfloat16) || a.dtype() != t || b.dtype() != t || b.ndim() != 2) {
    return false;
  }
  const int64_t K = b.shape(0);
  const int64_t rows = K > 0 ? static_cast<int64_t>(a.size()) / K : 0;
  return rows > 0 && rows <= kHalfGemvRows && b.strides(0) == 1 && b.strides(1) >= K;
}

// target (float32, row-contiguous, out's shape) = alpha (a @ b) [+ beta target].
void half_gemv(const array& a, const array& b, array& target, float alpha, float beta,
               bool accumulate) {
  const int64_t K = b.shape(0), N = b.shape(1);
  const int64_t rows = static_cast<int64_t>(a.size()) / K;
  array x(a.shape(), float32, nullptr, {});
  x.set_data(allocator::malloc(x.nbytes()));
  cpu::copy_into(a, x);
  const bool direct = alpha == 1.f && !accumulate;
  array dots = direct ? target : array({static_cast<int>(rows), static_cast<int>(N)}, float32,
                                       nullptr, {});
  if (!direct) dots.set_data(allocator::malloc(dots.nbytes()));
  const auto* w = static_cast<const uint16_t*>(b.raw_data());
  const int64_t ldw = b.strides(1);
  const bool bf16 = b.dtype() == bfloat16;
  const float* xp = x.data<float>();
  float* dp = dots.data<float>();
  cpu::parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
    cpu::half_row_dots(bf16, w, ldw, xp, rows, K, n0, n1, dp, N);
  });
  if (direct) return;
  float* tp = target.data<float>();
  for (int64_t i = 0; i < rows * N; ++i) {
    tp[i] = accumulate ? alpha * dp[i] + beta * tp[i] : alpha * dp[i];
  }
}

// out = alpha (a @ b) [+ beta c]: the shared body of Matmul and AddMM.
void eval_product(const array& a_in, const array& b_shared, const array* c, array& out,
                  float alpha, float beta) {
  cpu::blas_init();
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  const int nd = static_cast<int>(out.ndim());
  // A b shared by every batch element (Note [A shared b]) read at stride 0.
  const array b_in = views::batched_like(b_shared, out);
  const int64_t M = out.shape(nd - 2), N = out.shape(nd - 1), K = a_in.shape(nd - 1);
  const Dtype compute = compute_dtype(out.dtype());
  const bool direct = compute == out.dtype();

  // The buffer the product is written to: out itself, or a float32 temporary.
  array target = direct ? out : array(out.shape(), compute, nullptr, {});
  if (c && direct && c->dtype() == compute && c->flags().row_contiguous &&
      c->data_size() == c->size() && c->is_donatable()) {
    array donor = *c;
    target.move_shared_buffer(donor);
  } else {
    target.set_data(allocator::malloc(target.nbytes()));
    if (c) cpu::copy_into(*c, target);
  }

  if (K == 0) {
    // Nothing to contract: the result is beta * c, or zeros.
    scale(target, c ? beta : 0.f);
  } else if (half_gemv_applies(a_in, b_shared, out)) {
    half_gemv(a_in, b_shared, target, alpha, beta, c != nullptr);
  } else {
    run_gemm(a_in, b_in, target, M, N, K, alpha, beta, c != nullptr);
  }

  if (!direct) {
    out.set_data(allocator::malloc(out.nbytes()));
    cpu::cast_contiguous(target.raw_data(), compute, out.raw_data(), out.dtype(), out.size());
  }
}

}  // namespace

void Matmul::eval_cpu(const std::vector<array>& inputs, array& out) {
  eval_product(inputs[0], inputs[1], nullptr, out, 1.f, 0.f);
}

void AddMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  if (!is_inexact(out.dtype())) {
    throw std::logic_error("[AddMM] needs an inexact dtype (bug in the caller)");
  }
  eval_product(inputs[0], inputs[1], &inputs[2], out, alpha_, beta_);
}

}  // namespace tessera
