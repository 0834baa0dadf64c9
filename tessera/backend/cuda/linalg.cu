// eval_gpu of the linalg factorizations through cuSOLVER (64-bit API).
//
// The same storage tricks as the CPU (backend/cpu/linalg.cpp): a row-major
// buffer read column-major is the transpose, so inv, solve, cholesky, tri_inv,
// eigh and the SVD of wide matrices work on a plain copy of the input; LU, QR
// and the SVD of tall matrices transpose once on the device (copy_gpu with
// column-major destination strides). Every matrix of a batch is one call on
// the primitive's stream. Ops that must report a singular or indefinite
// matrix (inv, tri_inv, solve, cholesky) read cuSOLVER's info back, which
// waits for their stream; the others never synchronize. eig runs on the CPU
// only (as in MLX): linalg::eig refuses a GPU stream.
#include <cusolverDn.h>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/recording.h"
#include "tessera/ops/primitives/linalg.h"

namespace tessera {

namespace {

[[noreturn]] void throw_cusolver(const char* op, const char* call, cusolverStatus_t status) {
  std::ostringstream msg;
  msg << "[" << op << "] " << call << " failed with cuSOLVER status " << static_cast<int>(status);
  throw std::runtime_error(msg.str());
}

#define TESSERA_CUSOLVER_CHECK(op, call)                                          \
  do {                                                                            \
    cusolverStatus_t status_ = (call);                                            \
    if (status_ != CUSOLVER_STATUS_SUCCESS) throw_cusolver((op), #call, status_); \
  } while (0)

// One handle and parameter set per device, kept for the process. A handle is
// bound to a stream per call, so its users hold the lock for their calls.
struct Solver {
  cusolverDnHandle_t handle = nullptr;
  cusolverDnParams_t params = nullptr;
  std::mutex mutex;
};

Solver& solver(int device, const char* op) {
  static std::mutex mutex;
  static std::vector<Solver*> solvers;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(solvers.size())) solvers.resize(device + 1, nullptr);
  if (!solvers[device]) {
    auto* sv = new Solver;
    TESSERA_CUSOLVER_CHECK(op, cusolverDnCreate(&sv->handle));
    TESSERA_CUSOLVER_CHECK(op, cusolverDnCreateParams(&sv->params));
    solvers[device] = sv;
  }
  return *solvers[device];
}

// The handle, locked and bound to the stream of s, for the life of the object.
// cuSOLVER synchronises: nothing of a session is recorded (Note [Recorded
// batches] in recording.cpp).
struct Session {
  gpu::NoRecording no_recording;
  Solver& sv;
  std::unique_lock<std::mutex> lock;
  cudaStream_t stream;
  const char* op;
  Session(const Stream& s, const char* op)
      : sv(solver(s.device.index, op)), lock(sv.mutex), stream(gpu::cuda_stream(s)), op(op) {
    TESSERA_CUSOLVER_CHECK(op, cusolverDnSetStream(sv.handle, stream));
  }
  cusolverDnHandle_t h() const { return sv.handle; }
  cusolverDnParams_t p() const { return sv.params; }
};

cudaDataType cuda_type(Dtype t, const char* op) {
  if (t == float32) return CUDA_R_32F;
  if (t == float64) return CUDA_R_64F;
  throw std::logic_error(std::string("[") + op + "] needs float32 or float64 (bug)");
}

// Device and host workspaces of one size query; the host part is kept until
// the stream has finished with it (see finish()).
struct Workspace {
  void* device = nullptr;
  size_t device_bytes = 0;
  std::vector<char> host;
  void reserve(size_t dev, size_t hst, const Stream& s) {
    if (dev > device_bytes) {
      device = gpu::scratch(dev, s);
      device_bytes = dev;
    }
    if (hst > host.size()) host.resize(hst);
  }
  void* host_ptr() { return host.empty() ? nullptr : host.data(); }
  void finish(cudaStream_t stream) {
    if (!host.empty()) TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
};

int64_t batch_count(const array& a) {
  int64_t n = 1;
  for (size_t d = 0; d + 2 < a.ndim(); ++d) n *= a.shape(d);
  return n;
}

// The stack of m x n matrices a factorization reads (k = min(m, n)), in dtype
// t, which cuSOLVER knows as dt.
struct Matrices {
  Matrices(const array& a, const char* op)
      : m(a.shape(-2)), n(a.shape(-1)), k(std::min(m, n)), batches(batch_count(a)),
        t(a.dtype()), dt(cuda_type(t, op)) {}
  int64_t m, n, k, batches;
  Dtype t;
  cudaDataType dt;
};

// dst (batches of R x C, column-major) = src (batches of R x C, row-major).
void to_col_major(const void* src, void* dst, int64_t batches, int64_t r, int64_t c, Dtype t,
                  const Stream& s, const char* op) {
  Shape shape{static_cast<int>(batches), static_cast<int>(r), static_cast<int>(c)};
  gpu::copy_gpu(shape, src, t, {r * c, c, 1}, dst, t, {r * c, 1, r}, s, op);
}
// dst (row-major) = src (column-major), batches of R x C, with the leading
// dimension of src `ld` (>= R) and its batch stride `stride`.
void from_col_major(const void* src, int64_t ld, int64_t stride, void* dst, int64_t batches,
                    int64_t r, int64_t c, Dtype t, const Stream& s, const char* op) {
  Shape shape{static_cast<int>(batches), static_cast<int>(r), static_cast<int>(c)};
  gpu::copy_gpu(shape, src, t, {stride, 1, ld}, dst, t, {r * c, c, 1}, s, op);
}

// The input as a dense row-major device copy (a scratch buffer the kernels
// may overwrite).
void* dense_copy(const array& in, const Stream& s, const char* op) {
  void* p = gpu::scratch(std::max<size_t>(in.nbytes(), 1), s);
  if (in.size() > 0) {
    gpu::copy_gpu(in.shape(), gpu::device_ptr(in, s), in.dtype(), in.strides(), p, in.dtype(),
                  row_major_strides(in.shape()), s, op);
  }
  return p;
}

// Copies in into out's row-major buffer and returns its address.
void* output_copy(const array& in, array& out, const Stream& s, const char* op) {
  void* p = gpu::allocate_output(out, s);
  if (in.size() > 0) {
    gpu::copy_gpu(in.shape(), gpu::device_ptr(in, s), in.dtype(), in.strides(), p, out.dtype(),
                  row_major_strides(out.shape()), s, op);
  }
  return p;
}

// Throws if any info of the batch is positive: what(i) says what it means.
template <class What>
void check_info(const int* info, int64_t batches, const Stream& s, const char* op, What what) {
  gpu::NoRecording no_recording;
  cudaStream_t stream = gpu::cuda_stream(s);
  std::vector<int> host(batches);
  TESSERA_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), info, batches * sizeof(int), cudaMemcpyDeviceToHost, stream));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int64_t b = 0; b < batches; ++b) {
    if (host[b] < 0) {
      throw std::logic_error(std::string("[") + op + "] cuSOLVER rejected argument " +
                             std::to_string(-host[b]) + " (bug)");
    }
    if (host[b] > 0) throw std::invalid_argument(std::string("[") + op + "] " + what(host[b]));
  }
}

std::string singular(int info) {
  return "the matrix is singular: pivot " + std::to_string(info) +
         " of its LU factorization is zero";
}

// ---- small kernels

template <typename T>
__global__ void zero_triangle_kernel(T* a, int64_t total, int64_t rows, int64_t cols,
                                     bool upper_part) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % cols, r = (i / cols) % rows;
    if (upper_part ? c > r : c < r) a[i] = T(0);
  }
}

// Zeros the strictly upper (upper_part) or strictly lower triangle of every
// row-major rows x cols matrix.
void zero_triangle(void* a, Dtype t, int64_t batches, int64_t rows, int64_t cols, bool upper_part,
                   const Stream& s, const char* op) {
  const int64_t total = batches * rows * cols;
  if (total == 0) return;
  const int threads = 256;
  const unsigned blocks = gpu::grid_blocks(total, threads);
  if (t == float32) {
    zero_triangle_kernel<<<blocks, threads, 0, gpu::cuda_stream(s)>>>(static_cast<float*>(a), total,
                                                                      rows, cols, upper_part);
  } else {
    zero_triangle_kernel<<<blocks, threads, 0, gpu::cuda_stream(s)>>>(static_cast<double*>(a),
                                                                      total, rows, cols, upper_part);
  }
  gpu::check_launch(op);
}

template <typename T>
__global__ void identity_kernel(T* a, int64_t total, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % n, r = (i / n) % n;
    a[i] = r == c ? T(1) : T(0);
  }
}

void fill_identity(void* a, Dtype t, int64_t batches, int64_t n, const Stream& s, const char* op) {
  const int64_t total = batches * n * n;
  if (total == 0) return;
  const int threads = 256;
  const unsigned blocks = gpu::grid_blocks(total, threads);
  if (t == float32) {
    identity_kernel<<<blocks, threads, 0, gpu::cuda_stream(s)>>>(static_cast<float*>(a), total, n);
  } else {
    identity_kernel<<<blocks, threads, 0, gpu::cuda_stream(s)>>>(static_cast<double*>(a), total, n);
  }
  gpu::check_launch(op);
}

// LAPACK's 1-based pivots (k per matrix) as 0-based uint32 pivots, or as the
// row indices perm (m per matrix) with a == (L U)[perm]; one thread per matrix.
__global__ void pivots_kernel(const int64_t* ipiv, int64_t batches, int64_t m, int64_t k,
                              uint32_t* out, uint32_t* rows, bool row_indices) {
  const int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (b >= batches) return;
  const int64_t* p = ipiv ? ipiv + b * k : nullptr;
  if (!row_indices) {
    for (int64_t i = 0; i < k; ++i) out[b * k + i] = static_cast<uint32_t>(p[i] - 1);
    return;
  }
  uint32_t* r = rows + b * m;
  for (int64_t i = 0; i < m; ++i) r[i] = static_cast<uint32_t>(i);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = p[i] - 1;
    if (j < 0 || j >= m) continue;
    const uint32_t tmp = r[i];
    r[i] = r[j];
    r[j] = tmp;
  }
  for (int64_t i = 0; i < m; ++i) out[b * m + r[i]] = static_cast<uint32_t>(i);
}

// getrf of every n x n (lda n) matrix at a; pivots to ipiv (n per matrix).
void factor_lu(Session& ss, void* a, Dtype t, int64_t batches, int64_t m, int64_t n, int64_t* ipiv,
               int* info, const Stream& s) {
  const cudaDataType dt = cuda_type(t, ss.op);
  const int64_t k = std::min(m, n), lda = std::max<int64_t>(m, 1);
  size_t dev = 0, hst = 0;
  TESSERA_CUSOLVER_CHECK(ss.op, cusolverDnXgetrf_bufferSize(ss.h(), ss.p(), m, n, dt, a, lda, dt,
                                                            &dev, &hst));
  Workspace ws;
  ws.reserve(dev, hst, s);
  for (int64_t b = 0; b < batches; ++b) {
    char* ab = static_cast<char*>(a) + b * m * n * t.size;
    TESSERA_CUSOLVER_CHECK(ss.op, cusolverDnXgetrf(ss.h(), ss.p(), m, n, dt, ab, lda, ipiv + b * k,
                                                   dt, ws.device, dev, ws.host_ptr(), hst,
                                                   info + b));
  }
  ws.finish(ss.stream);
}

// Solves each of the batches of n x n systems whose matrices lu holds
// (column-major; LU-factored in place) for the n x k right-hand sides of rhs
// (column-major, overwritten by the solutions); trans applies to the matrices.
// info holds 2 * batches entries: getrf's, then getrs's.
void lu_solve(void* lu, void* rhs, Dtype t, int64_t batches, int64_t n, int64_t k,
              cublasOperation_t trans, int* info, const Stream& s, const char* op) {
  const cudaDataType dt = cuda_type(t, op);
  auto* ipiv = static_cast<int64_t*>(gpu::scratch(batches * n * 8, s));
  Session ss(s, op);
  factor_lu(ss, lu, t, batches, n, n, ipiv, info, s);
  for (int64_t b = 0; b < batches; ++b) {
    TESSERA_CUSOLVER_CHECK(
        op, cusolverDnXgetrs(ss.h(), ss.p(), trans, n, k, dt,
                             static_cast<char*>(lu) + b * n * n * t.size, n, ipiv + b * n, dt,
                             static_cast<char*>(rhs) + b * n * k * t.size, n, info + batches + b));
  }
}

}  // namespace

// ---- LUF

void LUF::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Stream& s = stream();
  const char* op = "linalg::lu_factor";
  const array& a = inputs[0];
  const int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n), batches = batch_count(a);
  void* lu = gpu::allocate_output(outputs[0], s);
  uint32_t* second = second_ == none ? nullptr : gpu::allocate_output<uint32_t>(outputs[1], s);
  const int threads = 128;
  const unsigned blocks = static_cast<unsigned>((batches + threads - 1) / threads);
  if (a.size() == 0) {
    // No columns (or no rows): the row indices are the identity.
    if (second_ == row_indices && batches * m > 0) {
      auto* tmp = static_cast<uint32_t*>(gpu::scratch(batches * m * sizeof(uint32_t), s));
      pivots_kernel<<<blocks, threads, 0, gpu::cuda_stream(s)>>>(nullptr, batches, m, 0, second,
                                                                 tmp, true);
      gpu::check_launch(op);
    }
    return;
  }
  void* rows = dense_copy(a, s, op);
  void* work = gpu::scratch(a.nbytes(), s);
  to_col_major(rows, work, batches, m, n, a.dtype(), s, op);
  auto* ipiv = static_cast<int64_t*>(gpu::scratch(std::max<int64_t>(batches * k, 1) * 8, s));
  auto* info = static_cast<int*>(gpu::scratch(batches * sizeof(int), s));
  {
    Session ss(s, op);
    factor_lu(ss, work, a.dtype(), batches, m, n, ipiv, info, s);
  }
  from_col_major(work, m, m * n, lu, batches, m, n, a.dtype(), s, op);
  if (second_ == none) return;
  auto* tmp = second_ == row_indices
                  ? static_cast<uint32_t*>(gpu::scratch(batches * m * sizeof(uint32_t), s))
                  : nullptr;
  pivots_kernel<<<blocks, threads, 0, gpu::cuda_stream(s)>>>(ipiv, batches, m, k, second, tmp,
                                                             second_ == row_indices);
  gpu::check_launch(op);
}

// ---- Solve

void Solve::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  const char* op = "linalg::solve";
  const array &a = inputs[0], &b = inputs[1];
  const int64_t n = a.shape(-1), k = b.shape(-1), batches = batch_count(a);
  void* x = gpu::allocate_output(out, s);
  if (out.size() == 0 || n == 0) return;
  const Dtype t = out.dtype();
  // The buffer is A^T column-major: factor A^T, solve with its transpose.
  void* lu = dense_copy(a, s, op);
  void* rhs = k == 1 ? x : gpu::scratch(out.nbytes(), s);
  if (k == 1) {
    gpu::copy_gpu(b.shape(), gpu::device_ptr(b, s), b.dtype(), b.strides(), x, t,
                  row_major_strides(out.shape()), s, op);
  } else {
    void* dense_b = dense_copy(b, s, op);
    to_col_major(dense_b, rhs, batches, n, k, t, s, op);
  }
  auto* info = static_cast<int*>(gpu::scratch(2 * batches * sizeof(int), s));
  lu_solve(lu, rhs, t, batches, n, k, CUBLAS_OP_T, info, s, op);
  check_info(info, batches, s, op, singular);
  if (k != 1) from_col_major(rhs, n, n * k, x, batches, n, k, t, s, op);
}

// ---- Inverse

void Inverse::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  const char* op = triangular_ ? "linalg::tri_inv" : "linalg::inv";
  [[maybe_unused]] const auto [m, n, k, batches, t, dt] = Matrices(out, op);
  if (out.size() == 0) {
    gpu::allocate_output(out, s);
    return;
  }
  auto* info = static_cast<int*>(gpu::scratch(2 * batches * sizeof(int), s));
  if (triangular_) {
    void* x = output_copy(inputs[0], out, s, op);
    {
      Session ss(s, op);
      // The lower triangle of A is the upper one of the buffer (A^T).
      const cublasFillMode_t uplo = upper_ ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
      size_t dev = 0, hst = 0;
      TESSERA_CUSOLVER_CHECK(op, cusolverDnXtrtri_bufferSize(ss.h(), uplo, CUBLAS_DIAG_NON_UNIT, n,
                                                             dt, x, n, &dev, &hst));
      Workspace ws;
      ws.reserve(dev, hst, s);
      for (int64_t b = 0; b < batches; ++b) {
        TESSERA_CUSOLVER_CHECK(
            op, cusolverDnXtrtri(ss.h(), uplo, CUBLAS_DIAG_NON_UNIT, n, dt,
                                 static_cast<char*>(x) + b * n * n * t.size, n, ws.device, dev,
                                 ws.host_ptr(), hst, info + b));
      }
      ws.finish(ss.stream);
    }
    check_info(info, batches, s, op, [](int i) {
      return "the matrix is singular: diagonal element " + std::to_string(i - 1) + " is zero";
    });
    zero_triangle(x, t, batches, n, n, !upper_, s, op);
    return;
  }
  // getrf of A^T, then getrs against the identity: inv(A^T) column-major is
  // inv(A) row-major.
  void* lu = dense_copy(inputs[0], s, op);
  void* x = gpu::allocate_output(out, s);
  fill_identity(x, t, batches, n, s, op);
  lu_solve(lu, x, t, batches, n, n, CUBLAS_OP_N, info, s, op);
  check_info(info, batches, s, op, singular);
}

// ---- Cholesky

void Cholesky::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  const char* op = "linalg::cholesky";
  [[maybe_unused]] const auto [m, n, k, batches, t, dt] = Matrices(out, op);
  if (out.size() == 0) {
    gpu::allocate_output(out, s);
    return;
  }
  void* x = output_copy(inputs[0], out, s, op);
  auto* info = static_cast<int*>(gpu::scratch(batches * sizeof(int), s));
  {
    Session ss(s, op);
    // The buffer is A^T: its factor U (A^T = U^T U) read row-major is L.
    const cublasFillMode_t uplo = upper_ ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
    size_t dev = 0, hst = 0;
    TESSERA_CUSOLVER_CHECK(op, cusolverDnXpotrf_bufferSize(ss.h(), ss.p(), uplo, n, dt, x, n, dt,
                                                           &dev, &hst));
    Workspace ws;
    ws.reserve(dev, hst, s);
    for (int64_t b = 0; b < batches; ++b) {
      TESSERA_CUSOLVER_CHECK(op, cusolverDnXpotrf(ss.h(), ss.p(), uplo, n, dt,
                                                  static_cast<char*>(x) + b * n * n * t.size, n,
                                                  dt, ws.device, dev, ws.host_ptr(), hst, info + b));
    }
    ws.finish(ss.stream);
  }
  check_info(info, batches, s, op, [](int i) {
    return "the matrix is not positive definite: its leading minor of order " + std::to_string(i) +
           " is not";
  });
  zero_triangle(x, t, batches, n, n, !upper_, s, op);
}

// ---- QRF

void QRF::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Stream& s = stream();
  const char* op = "linalg::qr";
  const array& a = inputs[0];
  const auto [m, n, k, batches, t, dt] = Matrices(a, op);
  void* q = gpu::allocate_output(outputs[0], s);
  void* r = gpu::allocate_output(outputs[1], s);
  if (k == 0 || batches == 0) return;
  void* rows = dense_copy(a, s, op);
  void* work = gpu::scratch(a.nbytes(), s);
  to_col_major(rows, work, batches, m, n, t, s, op);
  void* tau = gpu::scratch(batches * k * t.size, s);
  auto* info = static_cast<int*>(gpu::scratch(batches * sizeof(int), s));
  auto at = [&](void* base, int64_t b, int64_t per) {
    return static_cast<void*>(static_cast<char*>(base) + b * per * t.size);
  };
  Session ss(s, op);
  size_t dev = 0, hst = 0;
  TESSERA_CUSOLVER_CHECK(op, cusolverDnXgeqrf_bufferSize(ss.h(), ss.p(), m, n, dt, work, m, dt, tau,
                                                         dt, &dev, &hst));
  Workspace ws;
  ws.reserve(dev, hst, s);
  for (int64_t b = 0; b < batches; ++b) {
    TESSERA_CUSOLVER_CHECK(op, cusolverDnXgeqrf(ss.h(), ss.p(), m, n, dt, at(work, b, m * n), m, dt,
                                                at(tau, b, k), dt, ws.device, dev, ws.host_ptr(),
                                                hst, info + b));
  }
  // R: the first k rows of the factored matrix, its lower part zeroed.
  from_col_major(work, m, m * n, r, batches, k, n, t, s, op);
  zero_triangle(r, t, batches, k, n, false, s, op);
  // Q: the first k columns, expanded in place by orgqr.
  int lwork = 0;
  if (t == float32) {
    TESSERA_CUSOLVER_CHECK(op, cusolverDnSorgqr_bufferSize(ss.h(), m, k, k, static_cast<float*>(work),
                                                           m, static_cast<float*>(tau), &lwork));
  } else {
    TESSERA_CUSOLVER_CHECK(op, cusolverDnDorgqr_bufferSize(ss.h(), m, k, k, static_cast<double*>(work),
                                                           m, static_cast<double*>(tau), &lwork));
  }
  void* qwork = gpu::scratch(std::max(lwork, 1) * t.size, s);
  for (int64_t b = 0; b < batches; ++b) {
    if (t == float32) {
      TESSERA_CUSOLVER_CHECK(op, cusolverDnSorgqr(ss.h(), m, k, k, static_cast<float*>(at(work, b, m * n)),
                                                  m, static_cast<float*>(at(tau, b, k)),
                                                  static_cast<float*>(qwork), lwork, info + b));
    } else {
      TESSERA_CUSOLVER_CHECK(op, cusolverDnDorgqr(ss.h(), m, k, k, static_cast<double*>(at(work, b, m * n)),
                                                  m, static_cast<double*>(at(tau, b, k)),
                                                  static_cast<double*>(qwork), lwork, info + b));
    }
  }
  ws.finish(ss.stream);
  from_col_major(work, m, m * n, q, batches, m, k, t, s, op);
}

// ---- SVD

void SVD::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Stream& s = stream();
  const char* op = "linalg::svd";
  const array& a = inputs[0];
  const auto [m, n, k, batches, t, dt] = Matrices(a, op);
  void* u = compute_uv_ ? gpu::allocate_output(outputs[0], s) : nullptr;
  void* sv = gpu::allocate_output(outputs[compute_uv_ ? 1 : 0], s);
  void* vt = compute_uv_ ? gpu::allocate_output(outputs[2], s) : nullptr;
  if (batches == 0) return;
  if (k == 0) {
    if (compute_uv_) {
      fill_identity(u, t, batches, m, s, op);
      fill_identity(vt, t, batches, n, s, op);
    }
    return;
  }
  // gesvd needs rows >= columns. A wide A is factored as its transpose (the
  // raw buffer): A^T = V S U^T, whose left factor stored column-major is Vt
  // row-major, and whose right factor U^T is U row-major. A tall A is
  // transposed to column-major first; its factors are transposed back.
  const bool wide = n >= m;
  const int64_t rows = wide ? n : m, cols = wide ? m : n;
  void* work = dense_copy(a, s, op);
  if (!wide) {
    void* col = gpu::scratch(a.nbytes(), s);
    to_col_major(work, col, batches, m, n, t, s, op);
    work = col;
  }
  // Column-major left (rows x rows) and right (cols x cols) factors.
  void* left = nullptr;
  void* right = nullptr;
  if (compute_uv_) {
    left = wide ? vt : gpu::scratch(batches * rows * rows * t.size, s);
    right = wide ? u : gpu::scratch(batches * cols * cols * t.size, s);
  }
  auto at = [&](void* base, int64_t b, int64_t per) {
    return base ? static_cast<void*>(static_cast<char*>(base) + b * per * t.size) : nullptr;
  };
  auto* info = static_cast<int*>(gpu::scratch(batches * sizeof(int), s));
  const signed char job = compute_uv_ ? 'A' : 'N';
  {
    Session ss(s, op);
    size_t dev = 0, hst = 0;
    TESSERA_CUSOLVER_CHECK(op, cusolverDnXgesvd_bufferSize(ss.h(), ss.p(), job, job, rows, cols, dt,
                                                           work, rows, dt, sv, dt, left, rows, dt,
                                                           right, cols, dt, &dev, &hst));
    Workspace ws;
    ws.reserve(dev, hst, s);
    for (int64_t b = 0; b < batches; ++b) {
      TESSERA_CUSOLVER_CHECK(
          op, cusolverDnXgesvd(ss.h(), ss.p(), job, job, rows, cols, dt, at(work, b, m * n), rows, dt,
                               at(sv, b, k), dt, at(left, b, rows * rows), rows, dt,
                               at(right, b, cols * cols), cols, dt, ws.device, dev, ws.host_ptr(),
                               hst, info + b));
    }
    ws.finish(ss.stream);
  }
  if (compute_uv_ && !wide) {
    from_col_major(left, m, m * m, u, batches, m, m, t, s, op);
    // gesvd's right factor is Vt itself, column-major.
    from_col_major(right, n, n * n, vt, batches, n, n, t, s, op);
  }
}

// ---- Eigh

void Eigh::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Stream& s = stream();
  const char* op = "linalg::eigh";
  const array& a = inputs[0];
  const int64_t n = a.shape(-1), batches = batch_count(a);
  const Dtype t = a.dtype();
  const cudaDataType dt = cuda_type(t, op);
  void* w = gpu::allocate_output(outputs[0], s);
  void* v = compute_vectors_ ? gpu::allocate_output(outputs[1], s) : nullptr;
  if (n == 0 || batches == 0) return;
  void* work = dense_copy(a, s, op);
  auto* info = static_cast<int*>(gpu::scratch(batches * sizeof(int), s));
  {
    Session ss(s, op);
    // The buffer is A^T: A's lower triangle is its upper one.
    const cublasFillMode_t uplo = upper_ ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
    const cusolverEigMode_t jobz = compute_vectors_ ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    size_t dev = 0, hst = 0;
    TESSERA_CUSOLVER_CHECK(op, cusolverDnXsyevd_bufferSize(ss.h(), ss.p(), jobz, uplo, n, dt, work, n,
                                                           dt, w, dt, &dev, &hst));
    Workspace ws;
    ws.reserve(dev, hst, s);
    for (int64_t b = 0; b < batches; ++b) {
      TESSERA_CUSOLVER_CHECK(
          op, cusolverDnXsyevd(ss.h(), ss.p(), jobz, uplo, n, dt,
                               static_cast<char*>(work) + b * n * n * t.size, n, dt,
                               static_cast<char*>(w) + b * n * t.size, dt, ws.device, dev,
                               ws.host_ptr(), hst, info + b));
    }
    ws.finish(ss.stream);
  }
  // Eigenvectors are the columns of the column-major result.
  if (compute_vectors_) from_col_major(work, n, n * n, v, batches, n, n, t, s, op);
}

// ---- Eig: the CPU only (linalg::eig refuses GPU streams).

void Eig::eval_gpu(const std::vector<array>&, std::vector<array>&) {
  throw std::invalid_argument("[linalg::eig] runs on the CPU only: pass a CPU stream or device");
}

}  // namespace tessera
