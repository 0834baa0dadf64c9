// eval_gpu of Matmul and AddMM through cuBLASLt.
//
// cuBLASLt is column-major; Tessera's matrices are row-major. A row-major
// R x C matrix read column-major is its transpose, so the row-major product
// C = A B is computed as the column-major C^T = B^T A^T: cuBLASLt's first
// operand is b, its second a, and m = N, n = M. An operand whose last two axes
// are row-contiguous is passed as is (CUBLAS_OP_N, ld = its row stride), a
// column-contiguous one as CUBLAS_OP_T (ld = its column stride); anything else
// is copied once into a compact buffer that keeps broadcast batch axes
// unexpanded. Batch axes are collapsed: the last run of uniform strides
// (stride 0 for broadcast) is one strided-batch call, the rest a loop.
//
// float32 multiplies on the tensor cores in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32)
// unless MLX_ENABLE_TF32=0, MLX's variable and default, then in float32;
// float16 and bfloat16 accumulate in float32, float64 and complex64 in their
// own type.
// Integer and bool operands, prepared the same way, go to integer_gemm
// (matmul_int.cu) instead of cuBLASLt, and x @ W^T with at most 4 rows of x
// (decoding) to the matrix-vector kernel of gemv.cuh.
//
// gpu::gemm (matmul.h) runs the same cuBLASLt path for other kernels, on
// device matrices they lay out themselves, into rows of a stride of their own.
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tessera/backend/common/views.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/gemv.h"
#include "tessera/backend/cuda/matmul.h"
#include "tessera/backend/cuda/matmul_int.h"
#include "tessera/core/grouped.h"
#include "tessera/ops/primitives/matmul.h"

namespace tessera {

namespace {

[[noreturn]] void throw_cublas(const char* op, const char* call, cublasStatus_t status) {
  std::ostringstream msg;
  msg << "[" << op << "] " << call << " failed: " << cublasLtGetStatusName(status) << " ("
      << cublasLtGetStatusString(status) << ")";
  throw std::runtime_error(msg.str());
}

#define TESSERA_CUBLAS_CHECK(op, call)                                      \
  do {                                                                      \
    cublasStatus_t status_ = (call);                                        \
    if (status_ != CUBLAS_STATUS_SUCCESS) throw_cublas((op), #call, status_); \
  } while (0)

// One handle per device, created on first use and kept for the process (they
// are not destroyed at exit, when the CUDA context may already be gone).
cublasLtHandle_t lt_handle(int device, const char* op) {
  static std::mutex mutex;
  static std::vector<cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(handles.size())) handles.resize(device + 1, nullptr);
  if (!handles[device]) TESSERA_CUBLAS_CHECK(op, cublasLtCreate(&handles[device]));
  return handles[device];
}

constexpr size_t kMaxWorkspace = size_t(32) << 20;

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

GemmTypes gemm_types(Dtype t, const char* op) {
  switch (t.val) {
    case Dtype::Val::float32:
      return {CUDA_R_32F,
              gpu::tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
              CUDA_R_32F};
    case Dtype::Val::float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case Dtype::Val::bfloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case Dtype::Val::float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case Dtype::Val::complex64: return {CUDA_C_32F, CUBLAS_COMPUTE_32F, CUDA_C_32F};
    case Dtype::Val::bool_:
    case Dtype::Val::uint8:
    case Dtype::Val::uint16:
    case Dtype::Val::uint32:
    case Dtype::Val::uint64:
    case Dtype::Val::int8:
    case Dtype::Val::int16:
    case Dtype::Val::int32:
    case Dtype::Val::int64: break;  // integer_gemm
  }
  std::ostringstream msg;
  msg << "[" << op << "] dtype " << t << " is not a cuBLASLt type (bug)";
  throw std::logic_error(msg.str());
}

// A scalar of the scale type, for alpha and beta.
union Scalar {
  float f;
  double d;
  float c[2];
};

Scalar make_scalar(cudaDataType_t scale, float v) {
  Scalar s;
  std::memset(&s, 0, sizeof(s));
  if (scale == CUDA_R_64F) {
    s.d = v;
  } else if (scale == CUDA_C_32F) {
    s.c[0] = v;
  } else {
    s.f = v;
  }
  return s;
}

// How cuBLASLt reads a row-major R x C matrix with strides (row, col) as its
// transpose: trans false with ld = row when rows are dense, trans true with
// ld = col when columns are.
bool lt_layout(int64_t R, int64_t C, int64_t row, int64_t col, bool& trans, int64_t& ld) {
  if ((col == 1 || C == 1) && (R == 1 || row >= std::max<int64_t>(C, 1))) {
    trans = false;
    ld = R == 1 ? std::max<int64_t>(C, 1) : row;
    return true;
  }
  if ((row == 1 || R == 1) && (C == 1 || col >= std::max<int64_t>(R, 1))) {
    trans = true;
    ld = C == 1 ? std::max<int64_t>(R, 1) : col;
    return true;
  }
  return false;
}

// Element (i, k) of batch element b is at data + batch_loc(b) + (i, k) through
// (trans, ld) as above.
struct Operand {
  std::optional<array> holder;  // the input itself, or the compact copy it is read from
  const char* data;
  Strides batch_strides;
  bool trans;
  int64_t ld;
};

Operand prepare(const array& x, const Stream& s, const char* op) {
  const int nd = static_cast<int>(x.ndim());
  const int64_t R = x.shape(nd - 2), C = x.shape(nd - 1);
  bool trans;
  int64_t ld;
  if (lt_layout(R, C, x.strides()[nd - 2], x.strides()[nd - 1], trans, ld)) {
    Strides batch(x.strides().begin(), x.strides().end() - 2);
    return {x, static_cast<const char*>(gpu::device_ptr(x, s)), std::move(batch), trans, ld};
  }
  // Compact copy; broadcast batch axes stay of extent 1 (and stride 0).
  Shape shape = x.shape();
  for (int d = 0; d < nd - 2; ++d) {
    if (x.strides()[d] == 0) shape[d] = 1;
  }
  array v = views::view_of(x, shape, x.strides(), 0);
  array dense(shape, x.dtype(), nullptr, {});
  gpu::copy_gpu_to_row_contiguous(v, dense, s, op);
  Strides rs = row_major_strides(shape);
  Strides batch(nd - 2);
  for (int d = 0; d < nd - 2; ++d) batch[d] = shape[d] == 1 ? 0 : rs[d];
  return {dense, static_cast<const char*>(gpu::device_ptr(dense, s)), std::move(batch), false,
          std::max<int64_t>(C, 1)};
}

// x with (row, col) strides: (ld, 1) as read untransposed, (1, ld) transposed.
gpu::StridedMatrix strided(const Operand& x) {
  return {x.data, x.batch_strides, x.trans ? 1 : x.ld, x.trans ? x.ld : 1};
}

// RAII for cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  ~Layout() {
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};
struct Preference {
  cublasLtMatmulPreference_t d = nullptr;
  ~Preference() {
    if (d) cublasLtMatmulPreferenceDestroy(d);
  }
};

void make_layout(Layout& l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                 int32_t batch, int64_t batch_stride, const char* op) {
  TESSERA_CUBLAS_CHECK(op, cublasLtMatrixLayoutCreate(&l.d, type, rows, cols, ld));
  if (batch > 1) {
    TESSERA_CUBLAS_CHECK(op, cublasLtMatrixLayoutSetAttribute(
                                 l.d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
    TESSERA_CUBLAS_CHECK(op, cublasLtMatrixLayoutSetAttribute(
                                 l.d, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                 sizeof(batch_stride)));
  }
}

// The largest power of two (at most 256) dividing an address and the byte
// strides added to it: what cuBLASLt may assume about each matrix it reads.
uint32_t alignment(const void* p, const std::vector<int64_t>& byte_strides) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p);
  for (int64_t st : byte_strides) bits |= static_cast<uint64_t>(st < 0 ? -st : st);
  if (bits == 0) return 256;
  return static_cast<uint32_t>(std::min<uint64_t>(bits & (~bits + 1), 256));
}

// Heuristic results by problem, per process (descriptors are cheap to build;
// the heuristic query is not).
using AlgoKey = std::array<int64_t, 20>;

bool cached_algo(const AlgoKey& key, cublasLtMatmulAlgo_t& algo, size_t& ws, bool store) {
  static std::mutex mutex;
  static std::map<AlgoKey, std::pair<cublasLtMatmulAlgo_t, size_t>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (store) {
    if (cache.size() > 4096) cache.clear();
    cache[key] = {algo, ws};
    return true;
  }
  auto it = cache.find(key);
  if (it == cache.end()) return false;
  algo = it->second.first;
  ws = it->second.second;
  return true;
}

// Row-major strides of batch_shape for matrices of `matrix` elements each.
Strides dense_batch_strides(const Shape& batch_shape, int64_t matrix) {
  Strides out(batch_shape.size());
  int64_t st = matrix;
  for (int d = static_cast<int>(batch_shape.size()) - 1; d >= 0; --d) {
    out[d] = st;
    st *= batch_shape[d];
  }
  return out;
}

// out = alpha (a @ b) + beta out, every batch element: element (i, j) of batch
// element b at dst + elem_to_loc(b, batch_shape, out_batch) + i * ldc + j.
void gemm(const Operand& a, const Operand& b, void* dst, int64_t ldc, const Strides& out_batch,
          Dtype dtype, const Shape& batch_shape, int64_t M, int64_t N, int64_t K, float alpha,
          float beta, const Stream& s, const char* op) {
  const GemmTypes types = gemm_types(dtype, op);
  const int64_t esize = dtype.size;
  auto [bshape, bstrides] =
      tessera::collapse_contiguous_dims(batch_shape, {a.batch_strides, b.batch_strides, out_batch});
  const int nb = static_cast<int>(bshape.size());
  const int32_t count = bshape[nb - 1];
  const int64_t sa = bstrides[0][nb - 1], sb = bstrides[1][nb - 1], sc = bstrides[2][nb - 1];
  const Shape outer(bshape.begin(), bshape.end() - 1);
  const Strides oa(bstrides[0].begin(), bstrides[0].end() - 1);
  const Strides ob(bstrides[1].begin(), bstrides[1].end() - 1);
  const Strides oc(bstrides[2].begin(), bstrides[2].end() - 1);
  const int64_t n_outer = static_cast<int64_t>(shape_size(outer));

  auto byte_strides = [&](int64_t last, const Strides& rest) {
    std::vector<int64_t> v{last * esize};
    for (int64_t x : rest) v.push_back(x * esize);
    return v;
  };
  const uint32_t align_a = alignment(a.data, byte_strides(sa, oa));
  const uint32_t align_b = alignment(b.data, byte_strides(sb, ob));
  std::vector<int64_t> c_strides = byte_strides(sc, oc);
  c_strides.push_back(ldc * esize);
  const uint32_t align_c = alignment(dst, c_strides);

  const int device = s.device.index;
  cublasLtHandle_t handle = lt_handle(device, op);

  // cuBLASLt's A is b, its B is a (see the top of this file).
  MatmulDesc desc;
  TESSERA_CUBLAS_CHECK(op, cublasLtMatmulDescCreate(&desc.d, types.compute, types.scale));
  cublasOperation_t op_a = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  TESSERA_CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA,
                                                          &op_a, sizeof(op_a)));
  TESSERA_CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB,
                                                          &op_b, sizeof(op_b)));
  Layout la, lb, lc;
  make_layout(la, types.data, b.trans ? K : N, b.trans ? N : K, b.ld, count, sb, op);
  make_layout(lb, types.data, a.trans ? M : K, a.trans ? K : M, a.ld, count, sa, op);
  make_layout(lc, types.data, N, M, ldc, count, sc, op);

  AlgoKey key{device,  int64_t(dtype.val), b.trans, a.trans, M,       N,
              K,       b.ld,               a.ld,    count,   sa,      sb,
              sc,      align_a,            align_b, align_c, beta != 0.f, ldc, 0, 0};
  cublasLtMatmulAlgo_t algo;
  size_t ws_size = 0;
  if (!cached_algo(key, algo, ws_size, false)) {
    Preference pref;
    TESSERA_CUBLAS_CHECK(op, cublasLtMatmulPreferenceCreate(&pref.d));
    uint64_t max_ws = kMaxWorkspace;
    TESSERA_CUBLAS_CHECK(op, cublasLtMatmulPreferenceSetAttribute(
                                 pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                 sizeof(max_ws)));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
    for (auto& [attr, value] : aligns) {
      TESSERA_CUBLAS_CHECK(
          op, cublasLtMatmulPreferenceSetAttribute(pref.d, attr, &value, sizeof(value)));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    TESSERA_CUBLAS_CHECK(op, cublasLtMatmulAlgoGetHeuristic(handle, desc.d, la.d, lb.d, lc.d,
                                                            lc.d, pref.d, 1, &result, &found));
    if (found == 0) {
      std::ostringstream msg;
      msg << "[" << op << "] cuBLASLt has no algorithm for a (" << M << "," << K << ") @ (" << K
          << "," << N << ") product of " << dtype;
      throw std::runtime_error(msg.str());
    }
    algo = result.algo;
    ws_size = result.workspaceSize;
    cached_algo(key, algo, ws_size, true);
  }
  void* workspace = ws_size > 0 ? gpu::scratch(ws_size, s) : nullptr;
  const Scalar al = make_scalar(types.scale, alpha), be = make_scalar(types.scale, beta);
  cudaStream_t stream = gpu::cuda_stream(s);
  for (int64_t o = 0; o < n_outer; ++o) {
    const char* pa = a.data + tessera::elem_to_loc(o, outer, oa) * esize;
    const char* pb = b.data + tessera::elem_to_loc(o, outer, ob) * esize;
    char* pc = static_cast<char*>(dst) + tessera::elem_to_loc(o, outer, oc) * esize;
    TESSERA_CUBLAS_CHECK(op, cublasLtMatmul(handle, desc.d, &al, pb, la.d, pa, lb.d, &be, pc,
                                            lc.d, pc, lc.d, &algo, workspace, ws_size, stream));
  }
}

// The rows of x for the matrix-vector kernel (Note [Dense GEMV]) in x @ W^T,
// W in rows and shared by every batch element: the batch elements' rows of
// x, at one stride; 0 where that does not apply (then cuBLASLt). Their
// count is dense_gemv's to bound.
int64_t gemv_rows(const Operand& a, const Operand& b, const Shape& batch_shape, int64_t M) {
  static const bool enabled = [] {
    const char* v = std::getenv("TESSERA_DENSE_GEMV");
    return !(v && std::string(v) == "0");
  }();
  if (!enabled || a.trans || !b.trans) return 0;
  int64_t rows = M, stride = M * a.ld;
  for (int d = static_cast<int>(batch_shape.size()) - 1; d >= 0; --d) {
    if (batch_shape[d] == 1) continue;
    if (b.batch_strides[d] != 0 || a.batch_strides[d] != stride) return 0;
    rows *= batch_shape[d];
    stride *= batch_shape[d];
  }
  return rows;
}

// x @ W^T for a few rows of x (decoding) through the matrix-vector kernel;
// false where it does not apply.
bool few_rows(const Operand& a, const Operand& b, const Shape& batch_shape, int64_t M, int64_t N,
              int64_t K, void* dst, Dtype dtype, const Stream& s) {
  const int64_t rows = gemv_rows(a, b, batch_shape, M);
  return rows > 0 && gpu::dense_gemv(a.data, a.ld, b.data, b.ld, dst, N, dtype, rows, N, K, s);
}

// Whether x (..., R, C) is read in place with rows dense (no copy by prepare).
bool rows_in_place(const array& x, bool want_trans) {
  const int nd = static_cast<int>(x.ndim());
  bool trans;
  int64_t ld;
  return nd >= 2 && lt_layout(x.shape(nd - 2), x.shape(nd - 1), x.strides()[nd - 2],
                              x.strides()[nd - 1], trans, ld) &&
         trans == want_trans;
}

// out = alpha (a @ b) [+ beta c]: the shared body of Matmul and AddMM.
void eval_product(const array& a_in, const array& b_shared, const array* c, array& out,
                  float alpha, float beta, const Stream& s, const char* op) {
  if (out.size() == 0) {
    gpu::allocate_output(out, s);
    return;
  }
  const int nd = static_cast<int>(out.ndim());
  const array b_in = views::batched_like(b_shared, out);
  const int64_t M = out.shape(nd - 2), N = out.shape(nd - 1), K = a_in.shape(nd - 1);
  const Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  cudaStream_t stream = gpu::cuda_stream(s);

  void* dst;
  if (c && c->dtype() == out.dtype() && c->flags().row_contiguous &&
      c->data_size() == c->size() && c->is_donatable()) {
    array donor = *c;
    out.move_shared_buffer(donor);
    dst = gpu::writable_device_ptr(out, s);
  } else {
    dst = gpu::allocate_output(out, s);
    if (c) {
      gpu::copy_gpu(c->shape(), gpu::device_ptr(*c, s), c->dtype(), c->strides(), dst,
                    out.dtype(), out.strides(), s, op);
    }
  }
  if (!c) beta = 0.f;

  if (K == 0) {
    // Nothing to contract: beta * c, or zeros.
    if (beta == 0.f) {
      TESSERA_CUDA_CHECK(cudaMemsetAsync(dst, 0, out.nbytes(), stream));
    } else if (beta != 1.f) {
      // beta * c as a product of zero matrices with k = 1.
      const int64_t len = std::max(M, N);
      void* zeros = gpu::scratch(len * out.itemsize(), s);
      TESSERA_CUDA_CHECK(cudaMemsetAsync(zeros, 0, len * out.itemsize(), stream));
      Strides none(batch_shape.size(), 0);
      Operand za{out, static_cast<const char*>(zeros), none, false, 1};
      Operand zb{out, static_cast<const char*>(zeros), none, false, std::max<int64_t>(N, 1)};
      gemm(za, zb, dst, N, dense_batch_strides(batch_shape, M * N), out.dtype(), batch_shape, M,
           N, 1, 0.f, beta, s, op);
    }
    return;
  }
  Operand a = prepare(a_in, s, op);
  Operand b = prepare(b_in, s, op);
  if (!c && alpha == 1.f && few_rows(a, b, batch_shape, M, N, K, dst, out.dtype(), s)) return;
  if (is_inexact(out.dtype())) {
    gemm(a, b, dst, N, dense_batch_strides(batch_shape, M * N), out.dtype(), batch_shape, M, N,
         K, alpha, beta, s, op);
  } else {
    gpu::integer_gemm(strided(a), strided(b), dst, out.dtype(), batch_shape, M, N, K, s, op);
  }
}

}  // namespace

namespace gpu {

bool tf32_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MLX_ENABLE_TF32");
    return !v || !*v || std::atoi(v) != 0;
  }();
  return on;
}

}  // namespace gpu

bool gpu::grouped_matmul(const GroupedProducts& g, const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  const Stream& s = g.stream();
  const array& x = inputs[0];
  const int nd = static_cast<int>(x.ndim());
  const Dtype dtype = outputs[0].dtype();
  if (!rows_in_place(x, false)) return false;
  const int64_t M = x.shape(nd - 2), K = x.shape(nd - 1);
  std::vector<array> weights;
  for (size_t i = 0; i < g.size(); ++i) {
    const array& out = outputs[i];
    if (out.size() == 0 || out.dtype() != dtype || static_cast<int>(out.ndim()) != nd) {
      return false;
    }
    weights.push_back(views::batched_like(g.member_inputs(i, inputs)[1], out));
    if (!rows_in_place(weights.back(), true)) return false;
  }
  const Operand a = prepare(x, s, "Matmul");
  std::vector<gpu::GemvWeight> ws;
  int64_t rows = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const Operand b = prepare(weights[i], s, "Matmul");
    const Shape batch_shape(outputs[i].shape().begin(), outputs[i].shape().end() - 2);
    const int64_t r = gemv_rows(a, b, batch_shape, M);
    if (r == 0 || (rows != 0 && r != rows)) return false;
    rows = r;
    const int64_t N = outputs[i].shape(nd - 1);
    ws.push_back({b.data, b.ld, nullptr, N, N});
  }
  const int count = static_cast<int>(ws.size());
  if (!gpu::dense_gemv_applies(a.data, a.ld, ws.data(), count, dtype, rows, K)) return false;
  for (int i = 0; i < count; ++i) ws[i].y = gpu::allocate_output(outputs[i], s);
  return gpu::dense_gemv(a.data, a.ld, ws.data(), count, dtype, rows, K, s);
}

void gpu::gemm(const StridedMatrix& a, const StridedMatrix& b, void* c, int64_t ldc,
               const Strides& c_batch_strides, Dtype dtype, const Shape& batch_shape, int64_t M,
               int64_t N, int64_t K, const Stream& s, const char* op) {
  auto operand = [&](const StridedMatrix& x, int64_t rows, int64_t cols) {
    Operand o{std::nullopt, static_cast<const char*>(x.data), x.batch_strides, false, 0};
    if (!lt_layout(rows, cols, x.row, x.col, o.trans, o.ld)) {
      std::ostringstream msg;
      msg << "[" << op << "] a GEMM operand needs a unit row or column stride (bug)";
      throw std::logic_error(msg.str());
    }
    return o;
  };
  gemm(operand(a, M, K), operand(b, K, N), c, ldc, c_batch_strides, dtype, batch_shape, M, N, K,
       1.f, 0.f, s, op);
}

void Matmul::eval_gpu(const std::vector<array>& inputs, array& out) {
  eval_product(inputs[0], inputs[1], nullptr, out, 1.f, 0.f, stream(), "Matmul");
}

void AddMM::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!is_inexact(out.dtype())) {
    throw std::logic_error("[AddMM] needs an inexact dtype (bug in the caller)");
  }
  eval_product(inputs[0], inputs[1], &inputs[2], out, alpha_, beta_, stream(), "AddMM");
}

}  // namespace tessera
