// vecdot, diff, gather_mm, gather_qmm, segmented_mm, block_masked_mm, hadamard_transform:
// compositions of existing ops (see products.h).
#include "tessera/ops/products.h"

#include <cmath>
#include <string>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/quantized.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

Shape batch_of(const array& a) { return Shape(a.shape().begin(), a.shape().end() - 2); }

void check_matrices(const array& a, const array& b, const char* op) {
  if (a.ndim() < 2 || b.ndim() < 2) {
    throw_invalid(op, "expected matrices (at least 2 dimensions), got shapes " +
                          shape_str(a.shape()) + " and " + shape_str(b.shape()));
  }
  if (a.shape(-1) != b.shape(-2)) {
    throw_invalid(op, "shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                          " are not compatible for a matrix product");
  }
}

void check_indices(const array& idx, const char* op, const char* name) {
  if (!issubdtype(idx.dtype(), integer)) {
    throw_invalid(op, std::string(name) + " must have an integer dtype, got " +
                          dtype_name(idx.dtype()));
  }
}

// The matrices of x (..., R, C) chosen by flat batch index: (idx..., R, C).
array gather_matrices(const array& x, const array& idx, StreamOrDevice s) {
  int batches = 1;
  for (int d : batch_of(x)) batches *= d;
  array flat = reshape(x, {batches, x.shape(-2), x.shape(-1)}, s);
  return take(flat, idx, 0, s);
}

// x, or with indices (checked for `op` under `name`) the matrices they choose.
array gathered(const array& x, const std::optional<array>& indices, const char* op,
               const char* name, StreamOrDevice s) {
  if (!indices) return x;
  check_indices(*indices, op, name);
  return gather_matrices(x, *indices, s);
}

// mask (..., ceil(R/bs), ceil(C/bs)) expanded to (..., R, C), in dtype t.
array expand_mask(const array& mask, int rows, int cols, int bs, Dtype t, const char* op,
                  const char* name, StreamOrDevice s) {
  const int br = (rows + bs - 1) / bs, bc = (cols + bs - 1) / bs;
  if (mask.ndim() < 2 || mask.shape(-2) != br || mask.shape(-1) != bc) {
    throw_invalid(op, std::string(name) + " must have shape (..., " + std::to_string(br) + ", " +
                          std::to_string(bc) + ") for block size " + std::to_string(bs) +
                          ", got " + shape_str(mask.shape()));
  }
  if (is_complex(mask.dtype())) {
    throw_invalid(op, std::string(name) + " must be boolean or real, got complex64");
  }
  const int nd = static_cast<int>(mask.ndim());
  array m = repeat(repeat(astype(mask, t, s), bs, nd - 2, s), bs, nd - 1, s);
  if (br * bs == rows && bc * bs == cols) return m;
  Shape start(nd, 0), stop = m.shape();
  stop[nd - 2] = rows;
  stop[nd - 1] = cols;
  return slice(m, start, stop, s);
}

}  // namespace

array vecdot(const array& a, const array& b, int axis, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw_invalid("vecdot", "inputs must have at least 1 dimension, got shapes " +
                                shape_str(a.shape()) + " and " + shape_str(b.shape()));
  }
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "vecdot");
  const int ax = normalize_axis(axis, static_cast<int>(shape.size()), "vecdot");
  array left = is_complex(a.dtype()) ? conjugate(a, s) : a;
  return sum(multiply(left, b, s), ax, false, s);
}

array diff(const array& a, int n, int axis, StreamOrDevice s) {
  if (n < 0) throw_invalid("diff", "order n must be non-negative, got " + std::to_string(n));
  if (a.ndim() == 0) throw_invalid("diff", "needs an array of at least one dimension");
  const int nd = static_cast<int>(a.ndim());
  const int ax = normalize_axis(axis, nd, "diff");
  array x = a;
  for (int i = 0; i < n && x.shape(ax) > 0; ++i) {
    Shape start(nd, 0), stop = x.shape();
    start[ax] = 1;
    array hi = slice(x, start, stop, s);
    start[ax] = 0;
    stop[ax] = x.shape(ax) - 1;
    array lo = slice(x, start, stop, s);
    x = x.dtype() == bool_ ? not_equal(hi, lo, s) : subtract(hi, lo, s);
  }
  return x;
}

array gather_mm(const array& a, const array& b, std::optional<array> lhs_indices,
                std::optional<array> rhs_indices, bool /*sorted_indices*/, StreamOrDevice s) {
  check_matrices(a, b, "gather_mm");
  array left = gathered(a, lhs_indices, "gather_mm", "lhs_indices", s);
  return matmul(left, gathered(b, rhs_indices, "gather_mm", "rhs_indices", s), s);
}

array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases, std::optional<array> lhs_indices,
                 std::optional<array> rhs_indices, bool transpose, std::optional<int> group_size,
                 std::optional<int> bits, const std::string& mode, bool /*sorted_indices*/,
                 StreamOrDevice s) {
  if (x.ndim() < 2 || w.ndim() < 2) {
    throw_invalid("gather_qmm", "expected matrices (at least 2 dimensions), got shapes " +
                                    shape_str(x.shape()) + " and " + shape_str(w.shape()));
  }
  if (scales.ndim() != w.ndim() || (biases && biases->ndim() != w.ndim())) {
    throw_invalid("gather_qmm", "scales and biases must have w's dimensions, got w " +
                                    shape_str(w.shape()) + " and scales " +
                                    shape_str(scales.shape()));
  }
  array left = gathered(x, lhs_indices, "gather_qmm", "lhs_indices", s);
  array right = gathered(w, rhs_indices, "gather_qmm", "rhs_indices", s);
  // The scales and biases go with w's matrices.
  array sc = gathered(scales, rhs_indices, "gather_qmm", "rhs_indices", s);
  std::optional<array> bi = biases;
  if (bi) bi = gathered(*bi, rhs_indices, "gather_qmm", "rhs_indices", s);
  return quantized_matmul(left, right, sc, bi, transpose, group_size, bits, mode, s);
}

array segmented_mm(const array& a, const array& b, const array& segments, StreamOrDevice s) {
  if (a.ndim() != 2 || b.ndim() != 2 || a.shape(1) != b.shape(0)) {
    throw_invalid("segmented_mm", "expected a (M, K) and b (K, N), got shapes " +
                                      shape_str(a.shape()) + " and " + shape_str(b.shape()));
  }
  if (segments.ndim() < 1 || segments.shape(-1) != 2) {
    throw_invalid("segmented_mm", "segments must have shape (..., 2), got " +
                                      shape_str(segments.shape()));
  }
  check_indices(segments, "segmented_mm", "segments");
  const int K = a.shape(1), nd = static_cast<int>(segments.ndim());
  Shape first(nd, 0), stop = segments.shape();
  stop[nd - 1] = 1;
  array start = slice(segments, first, stop, s);  // (..., 1)
  first[nd - 1] = 1;
  stop[nd - 1] = 2;
  array end = slice(segments, first, stop, s);
  array k = arange(0, K, s);
  array inside = logical_and(greater_equal(k, start, s), less(k, end, s), s);  // (..., K)
  Dtype t = promote_types(a.dtype(), b.dtype());
  // Each segment's columns of a (zeros elsewhere), times b.
  array masked = multiply(expand_dims(astype(inside, t, s), -2, s), a, s);  // (..., M, K)
  return matmul(masked, b, s);
}

array block_masked_mm(const array& a, const array& b, int block_size,
                      std::optional<array> mask_out, std::optional<array> mask_lhs,
                      std::optional<array> mask_rhs, StreamOrDevice s) {
  const char* op = "block_masked_mm";
  if (block_size != 32 && block_size != 64) {
    throw_invalid(op, "block_size must be 32 or 64, got " + std::to_string(block_size));
  }
  check_matrices(a, b, op);
  const int M = a.shape(-2), K = a.shape(-1), N = b.shape(-1);
  Dtype t = promote_types(a.dtype(), b.dtype());
  array left = a, right = b;
  if (mask_lhs) left = multiply(a, expand_mask(*mask_lhs, M, K, block_size, t, op, "mask_lhs", s), s);
  if (mask_rhs) right = multiply(b, expand_mask(*mask_rhs, K, N, block_size, t, op, "mask_rhs", s), s);
  array out = matmul(left, right, s);
  if (mask_out) out = multiply(out, expand_mask(*mask_out, M, N, block_size, t, op, "mask_out", s), s);
  return out;
}

namespace {

// The Hadamard matrices of orders 12, 20 and 28 that MLX uses: row i is the
// transform of the unit vector e_i ('+' is 1, '-' is -1).
constexpr const char* kHadamard12[12] = {
    "+-++++++++++",
    "--+-+-+-+-+-",
    "+++-++----++",
    "+---+--+-++-",
    "+++++-++----",
    "+-+---+--+-+",
    "++--+++-++--",
    "+--++---+--+",
    "++----+++-++",
    "+--+-++---+-",
    "++++----+++-",
    "+-+--+-++---",
};
constexpr const char* kHadamard20[20] = {
    "+-----++++--++--+--+",
    "-+---+-+++---+++-+--",
    "--+--++-+++---+-+-+-",
    "---+-+++-+++-----+-+",
    "----+++++--++--+--+-",
    "+----+----+-++---++-",
    "-+----+----+-++---++",
    "--+----+--+-+-++---+",
    "---+----+-++-+-++---",
    "----+----+-++-+-++--",
    "++--+-+--++----+----",
    "+++--+-+---+----+---",
    "-+++--+-+---+----+--",
    "--+++--+-+---+----+-",
    "+--+++--+-----+----+",
    "+-++-++--+-+++++----",
    "-+-+++++--+-+++-+---",
    "+-+-+-+++-++-++--+--",
    "++-+---++++++-+---+-",
    "-++-++--++++++-----+",
};
constexpr const char* kHadamard28[28] = {
    "+--------++++--+-++-+-++--++",
    "-+--------+++++-+-++-+-++--+",
    "--+----+---+++-+-+-++++-++--",
    "---+---++---+++-+-+-+-++-++-",
    "----+--+++---+++-+-+---++-++",
    "-----+-++++----++-+-++--++-+",
    "------+-++++--+-++-+-++--++-",
    "++----++------+--++---+-++-+",
    "+++-----+------+--++-+-+-++-",
    "-+++-----+------+--++-+-+-++",
    "--+++-----+---+--+--++-+-+-+",
    "---+++-----+--++--+--++-+-+-",
    "----+++-----+--++--+--++-+-+",
    "+----++------+--++--++-++-+-",
    "+-+--+--++--+++------++----+",
    "-+-+--++-++--+-+-----+++----",
    "+-+-+--++-++----+-----+++---",
    "-+-+-+--++-++----+-----+++--",
    "--+-+-+--++-++----+-----+++-",
    "+--+-+-+--++-+-----+-----+++",
    "-+--+-+++--++-------++----++",
    "+--++--+-+--+---++++-+------",
    "-+--++--+-+--+---++++-+-----",
    "--+--+++-+-+--+---+++--+----",
    "+--+--+-+-+-+-++---++---+---",
    "++--+----+-+-++++---+----+--",
    "-++--+-+--+-+-++++--------+-",
    "--++--+-+--+-+-++++--------+",
};

// The matrix of order m (12, 20 or 28) as an array of dtype t.
array hadamard_matrix(int m, Dtype t) {
  const char* const* rows = m == 12 ? kHadamard12 : m == 20 ? kHadamard20 : kHadamard28;
  std::vector<float> v;
  v.reserve(m * m);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < m; ++j) v.push_back(rows[i][j] == '+' ? 1.f : -1.f);
  }
  return astype(array(v.begin(), Shape{m, m}, float32), t);
}

}  // namespace

// A length n = m * 2^k (m = 1, 12, 20 or 28) is transformed as MLX does, by
// the matrix kron(H_m, S_{2^k}) (S: Sylvester's): the 2^k transform of each
// of the m rows of x reshaped to (m, 2^k), then H_m^T times the result.
array hadamard_transform(const array& a, std::optional<float> scale, StreamOrDevice s) {
  const char* op = "hadamard_transform";
  if (a.ndim() == 0) throw_invalid(op, "needs an array of at least one dimension");
  const int n = a.shape(-1);
  auto pow2 = [](int v) { return v > 0 && (v & (v - 1)) == 0; };
  int m = 1;
  for (int c : {12, 20, 28}) {
    if (!pow2(n) && n % c == 0 && pow2(n / c)) m = c;
  }
  if (!pow2(n) && m == 1) {
    throw_invalid(op, "the last axis must have length m * 2^k with m = 1, 12, 20 or 28, got " +
                          std::to_string(n));
  }
  if (is_complex(a.dtype())) throw_invalid(op, "complex input is not supported");
  array x = is_inexact(a.dtype()) ? a : astype(a, float32, s);
  const Shape shape = x.shape();
  const int p = n / m;
  int rows = m;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  // Sylvester's recursion H_p = [[H, H], [H, -H]]: at each step, within each
  // block of `width` elements, the halves become (top + bottom, top - bottom).
  for (int width = p; width > 1; width /= 2) {
    const int blocks = p / width, half = width / 2;
    array v = reshape(x, {rows, blocks, 2, half}, s);
    array top = take(v, 0, 2, s), bottom = take(v, 1, 2, s);
    x = stack({add(top, bottom, s), subtract(top, bottom, s)}, 2, s);
  }
  if (m > 1) {
    x = matmul(transpose(hadamard_matrix(m, x.dtype()), s), reshape(x, {rows / m, m, p}, s), s);
  }
  x = reshape(x, shape, s);
  const double k = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(n));
  return multiply(x, astype(array(k, float64), x.dtype(), s), s);
}

}  // namespace tessera
