// eval_cpu of Sort, SearchSorted and PermuteAxis.
//
// Every value is first mapped to an unsigned key whose order is NumPy's (see
// Note [Sort order] and sort_keys.h): a row is copied into a contiguous key
// buffer, then
//   values   LSD radix sort of the keys (11- or 8-bit digits, digits equal
//            in every key skipped), decoded back; std::sort for short rows;
//   indices  the same radix sort carrying uint32 indices (stable);
//            std::stable_sort for short rows;
//   partition  std::nth_element over indices, ordered by (key, index), so the
//            values are a gather through the indices.
// Rows run in parallel on the thread pool; a single long row is radix sorted
// by all threads together.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "tessera/backend/common/axis_plan.h"
#include "tessera/backend/common/sort_keys.h"
#include "tessera/backend/cpu/dispatch.h"
#include "tessera/backend/cpu/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/sort.h"

namespace tessera {

namespace {

using namespace cpu;

constexpr int64_t kShortRow = 64;           // rows below this use comparison sorts
constexpr int64_t kParallelWork = 1 << 14;  // elements per parallel chunk, at least
constexpr int64_t kLongRow = 1 << 18;       // a single row this long uses every thread

// LSD radix sort of keys[0, n) (with indices idx when idx != nullptr), using
// tk / ti as scratch of the same size; digits of 11 bits for 32- and 64-bit
// keys (3 or 6 passes), 8 bits otherwise. The result ends in keys / idx.
template <typename K>
void radix_sort(K* keys, K* tk, uint32_t* idx, uint32_t* ti, int64_t n) {
  constexpr int kBits = sizeof(K) >= 4 ? 11 : 8;
  constexpr int kRadix = 1 << kBits;
  constexpr int kPasses = (8 * sizeof(K) + kBits - 1) / kBits;
  std::vector<int64_t> count(kPasses * kRadix, 0);
  for (int64_t i = 0; i < n; ++i) {
    K k = keys[i];
    for (int b = 0; b < kPasses; ++b) ++count[b * kRadix + ((k >> (kBits * b)) & (kRadix - 1))];
  }
  K* src = keys;
  K* dst = tk;
  uint32_t* isrc = idx;
  uint32_t* idst = ti;
  for (int b = 0; b < kPasses; ++b) {
    const int shift = kBits * b;
    int64_t* c = count.data() + b * kRadix;
    if (c[(keys[0] >> shift) & (kRadix - 1)] == n) continue;  // one digit value: nothing moves
    int64_t sum = 0;
    for (int d = 0; d < kRadix; ++d) {
      int64_t t = c[d];
      c[d] = sum;
      sum += t;
    }
    if (isrc) {
      for (int64_t i = 0; i < n; ++i) {
        int64_t pos = c[(src[i] >> shift) & (kRadix - 1)]++;
        dst[pos] = src[i];
        idst[pos] = isrc[i];
      }
      std::swap(isrc, idst);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[c[(src[i] >> shift) & (kRadix - 1)]++] = src[i];
    }
    std::swap(src, dst);
  }
  if (src != keys) {
    std::memcpy(keys, src, n * sizeof(K));
    if (isrc) std::memcpy(idx, isrc, n * sizeof(uint32_t));
  }
}

// The same sort of one long row with every thread of the pool: per pass, each
// thread counts the digits of its slice, then scatters its slice at offsets
// that put it after the slices before it (so the sort stays stable).
template <typename K>
void parallel_radix_sort(K* keys, K* tk, uint32_t* idx, uint32_t* ti, int64_t n) {
  constexpr int kBits = sizeof(K) >= 4 ? 11 : 8;
  constexpr int kRadix = 1 << kBits;
  constexpr int kPasses = (8 * sizeof(K) + kBits - 1) / kBits;
  const int chunks = num_threads();
  std::vector<int64_t> count(int64_t(chunks) * kRadix);
  K* src = keys;
  K* dst = tk;
  uint32_t* isrc = idx;
  uint32_t* idst = ti;
  for (int b = 0; b < kPasses; ++b) {
    const int shift = kBits * b;
    std::fill(count.begin(), count.end(), 0);
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t* h = count.data() + c * kRadix;
        for (int64_t i = c * n / chunks, e = (c + 1) * n / chunks; i < e; ++i) {
          ++h[(src[i] >> shift) & (kRadix - 1)];
        }
      }
    });
    int64_t sum = 0;
    bool trivial = false;
    for (int d = 0; d < kRadix; ++d) {
      int64_t digit_total = 0;
      for (int c = 0; c < chunks; ++c) {
        int64_t t = count[int64_t(c) * kRadix + d];
        count[int64_t(c) * kRadix + d] = sum;
        sum += t;
        digit_total += t;
      }
      if (digit_total == n) trivial = true;
    }
    if (trivial) continue;
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t* h = count.data() + c * kRadix;
        for (int64_t i = c * n / chunks, e = (c + 1) * n / chunks; i < e; ++i) {
          int64_t pos = h[(src[i] >> shift) & (kRadix - 1)]++;
          dst[pos] = src[i];
          if (isrc) idst[pos] = isrc[i];
        }
      }
    });
    std::swap(src, dst);
    if (isrc) std::swap(isrc, idst);
  }
  if (src != keys) {
    std::memcpy(keys, src, n * sizeof(K));
    if (isrc) std::memcpy(idx, isrc, n * sizeof(uint32_t));
  }
}

// A single long row sorted by all threads (values or stable indices).
template <typename T>
void sort_long_row(const T* x, int64_t xs, void* out, int64_t ys, int64_t n, bool indices) {
  using Enc = SortKey<T>;
  using K = typename Enc::K;
  auto keys = std::make_unique_for_overwrite<K[]>(n);
  auto tk = std::make_unique_for_overwrite<K[]>(n);
  std::unique_ptr<uint32_t[]> idx, ti;
  if (indices) {
    idx = std::make_unique_for_overwrite<uint32_t[]>(n);
    ti = std::make_unique_for_overwrite<uint32_t[]>(n);
  }
  K* k = keys.get();
  uint32_t* ix = idx.get();
  parallel_for(n, kParallelWork, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) k[i] = Enc::encode(x[i * xs]);
    if (ix) std::iota(ix + b, ix + e, static_cast<uint32_t>(b));
  });
  parallel_radix_sort<K>(k, tk.get(), ix, ti.get(), n);
  parallel_for(n, kParallelWork, [&](int64_t b, int64_t e) {
    if (indices) {
      uint32_t* y = static_cast<uint32_t*>(out);
      for (int64_t i = b; i < e; ++i) y[i * ys] = ix[i];
    } else {
      T* y = static_cast<T*>(out);
      for (int64_t i = b; i < e; ++i) y[i * ys] = Enc::decode(k[i]);
    }
  });
}

template <typename T>
void run_sort(const T* x, void* out, const AxisPlan& p, Sort::Kind kind, int kth) {
  using Enc = SortKey<T>;
  using K = typename Enc::K;
  const int64_t n = p.n;
  if (p.rows == 0 || n == 0) return;
  const bool radix = n >= kShortRow && kind != Sort::PartitionValues && kind != Sort::PartitionIndices;
  const bool with_idx = kind != Sort::Values;
  if (p.rows == 1 && n >= kLongRow && num_threads() > 1 &&
      (kind == Sort::Values || kind == Sort::Indices)) {
    sort_long_row<T>(x, p.in_stride, out, p.out_stride, n, kind == Sort::Indices);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kParallelWork / n);
  parallel_for(p.rows, grain, [&](int64_t rb, int64_t re) {
    // Uninitialized buffers, reused by every row of the chunk.
    auto keys = std::make_unique_for_overwrite<K[]>(n);
    auto tk = std::make_unique_for_overwrite<K[]>(radix ? n : 0);
    auto idx = std::make_unique_for_overwrite<uint32_t[]>(with_idx ? n : 0);
    auto ti = std::make_unique_for_overwrite<uint32_t[]>(with_idx && radix ? n : 0);
    K* k = keys.get();
    uint32_t* ix = idx.get();
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + elem_to_loc(r, p.rest_shape, p.in_strides);
      const int64_t yo = elem_to_loc(r, p.rest_shape, p.out_strides);
      const int64_t xs = p.in_stride, ys = p.out_stride;
      for (int64_t i = 0; i < n; ++i) k[i] = Enc::encode(xr[i * xs]);
      if (kind == Sort::Values) {
        if (radix) {
          radix_sort<K>(k, tk.get(), nullptr, nullptr, n);
        } else {
          std::sort(k, k + n);
        }
        T* y = static_cast<T*>(out) + yo;
        if (ys == 1) {
          for (int64_t i = 0; i < n; ++i) y[i] = Enc::decode(k[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) y[i * ys] = Enc::decode(k[i]);
        }
        continue;
      }
      std::iota(ix, ix + n, 0u);
      if (kind == Sort::Indices) {
        if (radix) {
          radix_sort<K>(k, tk.get(), ix, ti.get(), n);
        } else {
          std::stable_sort(ix, ix + n, [&](uint32_t a, uint32_t b) { return k[a] < k[b]; });
        }
      } else {
        std::nth_element(ix, ix + kth, ix + n, [&](uint32_t a, uint32_t b) {
          return k[a] < k[b] || (k[a] == k[b] && a < b);
        });
      }
      if (kind == Sort::PartitionValues) {
        T* y = static_cast<T*>(out) + yo;
        for (int64_t i = 0; i < n; ++i) y[i * ys] = xr[int64_t(ix[i]) * xs];
      } else {
        uint32_t* y = static_cast<uint32_t*>(out) + yo;
        for (int64_t i = 0; i < n; ++i) y[i * ys] = ix[i];
      }
    }
  });
}

// The shape without `axis` and the strides of each stride set without it.
struct RestLayout {
  Shape shape;
  std::vector<Strides> strides;
};
RestLayout without_axis(const Shape& shape, const std::vector<Strides>& strides, int axis) {
  RestLayout r;
  r.strides.resize(strides.size());
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d == axis) continue;
    r.shape.push_back(shape[d]);
    for (size_t k = 0; k < strides.size(); ++k) r.strides[k].push_back(strides[k][d]);
  }
  return r;
}

Strides row_contiguous(const Shape& shape) {
  Strides s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

}  // namespace

void Sort::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  AxisPlan p = axis_plan(in.shape(), in.strides(), axis_);
  dispatch_all(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_complex_v<T>) {
      throw std::logic_error("[Sort] complex input reached the kernel (bug)");
    } else {
      run_sort<T>(in.data<T>(), out.raw_data(), p, kind_, kth_);
    }
  });
}

void SearchSorted::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& v = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_complex_v<T>) {
      throw std::logic_error("[SearchSorted] complex input reached the kernel (bug)");
    } else {
      using Enc = SortKey<T>;
      using K = typename Enc::K;
      const T* ap = a.data<T>();
      const int64_t n = a.size(), as = a.ndim() ? a.strides()[0] : 0;
      std::vector<K> keys(n);
      for (int64_t i = 0; i < n; ++i) keys[i] = Enc::encode(ap[i * as]);
      const T* vp = v.data<T>();
      uint32_t* y = out.data<uint32_t>();
      parallel_for(out.size(), kParallelWork, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          K k = Enc::encode(vp[elem_to_loc(i, v.shape(), v.strides())]);
          auto it = right_ ? std::upper_bound(keys.begin(), keys.end(), k)
                           : std::lower_bound(keys.begin(), keys.end(), k);
          y[i] = static_cast<uint32_t>(it - keys.begin());
        }
      });
    }
  });
}

void PermuteAxis::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& x = inputs[0];
  const array& perm = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  Strides ys = row_contiguous(out.shape());
  RestLayout rest = without_axis(x.shape(), {x.strides(), perm.strides(), ys}, axis_);
  const int64_t n = x.shape(axis_);
  const int64_t xs = x.strides()[axis_], ps = perm.strides()[axis_], os = ys[axis_];
  int64_t rows = 1;
  for (auto e : rest.shape) rows *= e;
  const uint32_t* pp = perm.data<uint32_t>();
  dispatch_bytes(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.raw_data());
    T* y = static_cast<T*>(out.raw_data());
    parallel_for(rows, std::max<int64_t>(1, kParallelWork / n), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = xp + elem_to_loc(r, rest.shape, rest.strides[0]);
        const uint32_t* pr = pp + elem_to_loc(r, rest.shape, rest.strides[1]);
        T* yr = y + elem_to_loc(r, rest.shape, rest.strides[2]);
        for (int64_t i = 0; i < n; ++i) {
          int64_t j = std::min<int64_t>(pr[i * ps], n - 1);
          yr[i * os] = xr[j * xs];
        }
      }
    });
  });
}

}  // namespace tessera
