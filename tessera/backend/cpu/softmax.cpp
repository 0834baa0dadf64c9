// eval_cpu of Softmax and LogSumExp: row kernels over the reduced axes.
//
// Both work on rows: the reduced elements of one output, contiguous. When the
// reduced axes of the input are already innermost and dense (softmax over the
// last axis of a row-major array), rows are read in place; otherwise the input
// is copied once, reduced axes last (casting to the float output type on the
// way). Per row: one pass for the max, one for exp(x - max) and its sum, and
// for softmax one to scale; rows run in parallel.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tessera/backend/cpu/copy.h"
#include "tessera/backend/cpu/dispatch.h"
#include "tessera/backend/cpu/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/backend/cpu/reduce.h"
#include "tessera/ops/primitives/reduce.h"

namespace tessera {

namespace {

using namespace cpu;

constexpr int kLanes = 16;
constexpr int64_t kBlock = kReduceBlock;
constexpr int64_t kParallelWork = 1 << 14;

// c ? a : b on the bits: the vectoriser takes float compares in a ternary for
// control flow (they may trap), and masks for what they are.
inline float select(bool c, float a, float b) {
  uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// exp(x) for float without branches, so loops over it vectorise: Cephes'
// polynomial on x - n ln2, scaled by 2^n through the exponent bits (about 1 ulp).
inline float exp_f(float x) {
  constexpr float hi = 88.72283f;
  constexpr float lo = -87.33654f;
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float xc = select(x < lo, lo, x);
  xc = select(xc > hi, hi, xc);
  float t = xc * 1.44269504088896341f + magic;
  float n = t - magic;
  uint32_t ni = std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(magic);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float scale = std::bit_cast<float>((ni + 126u) << 23);  // 2^(n-1), n in [-126, 128]
  float y = p * scale * 2.0f;
  y = select(x > hi, std::numeric_limits<float>::infinity(), y);
  return select(x < lo, 0.0f, y);
}

template <typename C>
inline C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return exp_f(x);
  } else {
    return std::exp(x);
  }
}

// Max of a row, NaN propagating.
template <typename T>
compute_t<T> row_max(const T* x, int64_t n) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, C>) return extremum_contiguous<C, true>(x, n);
  C lanes[kLanes];
  for (int k = 0; k < kLanes; ++k) lanes[k] = -std::numeric_limits<C>::infinity();
  auto pick = [](C a, C v) { return ((v > a) | (v != v)) ? v : a; };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] = pick(lanes[k], static_cast<C>(x[i + k]));
  }
  C m = -std::numeric_limits<C>::infinity();
  for (; i < n; ++i) m = pick(m, static_cast<C>(x[i]));
  for (int k = 0; k < kLanes; ++k) m = pick(m, lanes[k]);
  return m;
}

template <typename C>
C lane_sum(const C* e, int64_t n) {
  C lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += e[i + k];
  }
  C s = 0;
  for (; i < n; ++i) s += e[i];
  for (int k = 0; k < kLanes; ++k) s += lanes[k];
  return s;
}

// Hot leaf loops are compiled for AVX-512 and AVX2 too, chosen at load time.

// The float32 row loops of softmax: e = exp(x - m), returns sum(e); y = e * inv.
TESSERA_SIMD_CLONES double exp_sum_f32(const float* x, int64_t n, float m, float* e) {
  float buf[kBlock];
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    float* eb = e ? e + b : buf;
    for (int64_t i = 0; i < len; ++i) eb[i] = exp_f(x[b + i] - m);
    float lanes[2 * kLanes] = {};
    int64_t i = 0;
    for (; i + 2 * kLanes <= len; i += 2 * kLanes) {
      for (int k = 0; k < 2 * kLanes; ++k) lanes[k] += eb[i + k];
    }
    float s = 0;
    for (; i < len; ++i) s += eb[i];
    for (int k = 0; k < 2 * kLanes; ++k) s += lanes[k];
    total += s;
  }
  return total;
}
TESSERA_SIMD_CLONES void scale_f32(float* y, int64_t n, float inv) {
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

// Sum of exp(x - m) over a row, a block at a time: one loop stores the exps (in
// e when given, else in a block buffer), one sums them.
template <typename T>
double row_exp_sum(const T* x, int64_t n, compute_t<T> m, compute_t<T>* e) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float>) return exp_sum_f32(x, n, m, e);
  C buf[kBlock];
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    const T* xb = x + b;
    C* eb = e ? e + b : buf;
    for (int64_t i = 0; i < len; ++i) eb[i] = exp_c(static_cast<C>(xb[i]) - m);
    total += lane_sum(eb, len);
  }
  return total;
}

// y may alias x. scratch holds n compute-type elements when T is 16-bit.
template <typename T>
void softmax_row(const T* x, T* y, int64_t n, compute_t<T>* scratch) {
  using C = compute_t<T>;
  C m = row_max(x, n);
  C* e = std::is_same_v<T, C> ? reinterpret_cast<C*>(y) : scratch;
  C inv = static_cast<C>(1.0 / row_exp_sum<T>(x, n, m, e));
  if constexpr (std::is_same_v<T, float>) return scale_f32(y, n, inv);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(e[i] * inv);
}

template <typename T>
T logsumexp_row(const T* x, int64_t n) {
  using C = compute_t<T>;
  if (n == 0) return static_cast<T>(-std::numeric_limits<C>::infinity());
  C m = row_max(x, n);
  if (std::isinf(m) || std::isnan(m)) return static_cast<T>(m);
  return static_cast<T>(m + static_cast<C>(std::log(row_exp_sum<T>(x, n, m, nullptr))));
}

// Calls f(TypeTag<T>) for the floating output dtypes of these ops.
template <typename F>
void dispatch_float(Dtype t, F&& f) {
  switch (t.val) {
    case Dtype::Val::float16: return f(TypeTag<float16_t>{});
    case Dtype::Val::bfloat16: return f(TypeTag<bfloat16_t>{});
    case Dtype::Val::float32: return f(TypeTag<float>{});
    case Dtype::Val::float64: return f(TypeTag<double>{});
    default:
      throw std::logic_error("[softmax] unexpected output dtype " + dtype_name(t) + " (bug)");
  }
}

// The kept axes (collapsed) and the reduced extent of `in`; rows_inplace when
// the reduced axes collapse to one contiguous innermost run.
struct RowView {
  Shape kept_shape;
  Strides kept_strides;
  int64_t n = 1;
  bool rows_inplace = false;
  std::vector<int> perm;  // kept axes, then reduced axes
};

RowView row_view(const array& in, const std::vector<int>& axes) {
  RowView v;
  std::vector<char> reduced(in.ndim(), 0);
  for (int ax : axes) reduced[ax] = 1;
  Shape ks, rs;
  Strides kst, rst;
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (reduced[d]) {
      rs.push_back(in.shape(d));
      rst.push_back(in.strides(d));
      v.n *= in.shape(d);
    } else {
      ks.push_back(in.shape(d));
      kst.push_back(in.strides(d));
      v.perm.push_back(d);
    }
  }
  for (int ax : axes) v.perm.push_back(ax);
  auto [cks, ckst] = collapse_contiguous_dims(ks, {kst});
  v.kept_shape = std::move(cks);
  v.kept_strides = std::move(ckst[0]);
  auto [crs, crst] = collapse_contiguous_dims(rs, {rst});
  v.rows_inplace = v.n <= 1 || (crs.size() == 1 && crst[0][0] == 1);
  return v;
}

// A view of `in` with its axes in perm order (no copy).
array permuted_view(const array& in, const std::vector<int>& perm) {
  Shape shape;
  Strides strides;
  for (int d : perm) {
    shape.push_back(in.shape(d));
    strides.push_back(in.strides(d));
  }
  Flags flags = compute_flags(shape, strides);
  if (in.data_size() != in.size()) flags.contiguous = flags.row_contiguous = flags.col_contiguous = false;
  array v(shape, in.dtype(), nullptr, {});
  v.copy_shared_buffer(in, strides, flags, in.data_size());
  return v;
}

template <typename F>
void for_rows(int64_t rows, int64_t n, F&& f) {
  int64_t grain = std::max<int64_t>(1, kParallelWork / std::max<int64_t>(n, 1));
  parallel_for(rows, grain, f);
}

}  // namespace

void Softmax::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  RowView v = row_view(in, axes_);
  bool dense = in.flags().contiguous && in.data_size() == in.size();
  for (auto s : in.strides()) dense &= s >= 0;
  const void* src;
  Shape kept_shape = v.kept_shape;
  Strides kept_strides = v.kept_strides;
  if (in.dtype() == out.dtype() && dense && v.rows_inplace) {
    // Same layout as the input, in place when the input is not used again.
    src = in.raw_data();
    if (in.is_donatable()) {
      out.move_shared_buffer(in);
    } else {
      out.set_data(allocator::malloc(out.nbytes()), in.data_size(), in.strides(), in.flags());
    }
  } else {
    // Rows in the output's own buffer: reduced axes last, cast on the way in.
    Shape perm_shape;
    for (int d : v.perm) perm_shape.push_back(in.shape(d));
    Strides rm = row_major_strides(perm_shape);
    Strides strides(in.ndim());
    for (size_t q = 0; q < v.perm.size(); ++q) strides[v.perm[q]] = rm[q];
    out.set_data(allocator::malloc(out.nbytes()), out.size(), strides,
                 compute_flags(out.shape(), strides));
    array w(perm_shape, out.dtype(), nullptr, {});
    w.copy_shared_buffer(out, rm, compute_flags(perm_shape, rm), out.size());
    copy_into(permuted_view(in, v.perm), w);
    src = out.raw_data();
    kept_shape = {static_cast<ShapeElem>(out.size() / v.n)};
    kept_strides = {v.n};
  }
  const int64_t n = v.n;
  const int64_t rows = out.size() / n;
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(src);
    T* y = out.data<T>();
    for_rows(rows, n, [&](int64_t b, int64_t e) {
      std::vector<compute_t<T>> scratch(std::is_same_v<T, compute_t<T>> ? 0 : n);
      for (int64_t r = b; r < e; ++r) {
        int64_t loc = elem_to_loc(r, kept_shape, kept_strides);
        softmax_row<T>(x + loc, y + loc, n, scratch.data());
      }
    });
  });
}

void LogSumExp::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  RowView v = row_view(in, axes_);
  array src = in;
  if (in.dtype() != out.dtype() || !v.rows_inplace) {
    array permuted = permuted_view(in, v.perm);
    src = array(permuted.shape(), out.dtype(), nullptr, {});
    copy_to_row_contiguous(permuted, src);
    v.kept_shape = {static_cast<ShapeElem>(out.size())};
    v.kept_strides = {v.n};
  }
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = src.data<T>();
    T* y = out.data<T>();
    for_rows(static_cast<int64_t>(out.size()), v.n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        y[r] = logsumexp_row(x + elem_to_loc(r, v.kept_shape, v.kept_strides), v.n);
      }
    });
  });
}

}  // namespace tessera
