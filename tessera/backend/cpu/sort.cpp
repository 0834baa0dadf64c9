// eval_cpu of Sort, SearchSorted and PermuteAxis.
//
// Every value is first mapped to an unsigned key whose order is NumPy's (see
// Note [Sort order] and sort_keys.h): a row is copied into a contiguous key
// buffer, then
//   values   Highway's vqsort for long rows where it is built in (Note
//            [vqsort]: float, double and integers of 16 to 64 bits sorted as
//            they are, without keys); otherwise radix sort of the keys (Note
//            [Radix sort]), decoded into the output by the last pass; std::sort for
//            short rows;
//   indices  vqsort of (key, index) pairs for long rows of keys up to 32 bits;
//            otherwise the same radix sort carrying uint32 indices (stable);
//            std::stable_sort for short rows;
//   partition  std::nth_element over indices, ordered by (key, index), so the
//            values are a gather through the indices.
// Rows run in parallel on the thread pool; a single long row is radix sorted
// by all threads together, or vqsorted on one thread.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "tessera/backend/common/axis_plan.h"
#include "tessera/backend/common/sort_keys.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/memory/allocator.h"
#include "tessera/ops/primitives/sort.h"

#if TESSERA_HAVE_VQSORT
#include <hwy/contrib/sort/vqsort.h>
#endif

namespace tessera {

namespace {

using namespace cpu;

constexpr int64_t kShortRow = 64;           // rows below this use comparison sorts
constexpr int64_t kParallelWork = 1 << 14;  // elements per parallel chunk, at least
constexpr int64_t kLeaf = 1 << 17;          // runs this short are LSD sorted in cache
constexpr int kFineBits = 16;               // bits of one MSD level
constexpr int kBuckets = 256;               // buckets of one MSD level, at most

// Note [Radix sort]
// Keys (sort_keys.h) are sorted by a hybrid radix sort, stable throughout, so
// indices carried beside the keys give argsort:
//   leaf  a run of at most kLeaf keys (or a short row): LSD radix sort, the
//         histograms of all digits counted in one pass, digits equal in every
//         key skipped; the last pass writes straight to the output (`emit`).
//   MSD   a longer run: a histogram of its next kFineBits bits, whose bins are
//         grouped into at most kBuckets buckets of about equal size (so skewed
//         keys such as the exponents of floats still split evenly); one scatter
//         into the buckets, then each bucket is sorted the same way, with the
//         bits below when it holds a single bin. Buckets fit in cache after one
//         level, where a plain LSD sort would stream the whole row through memory
//         once per digit.
// Every run lives in one of two buffers of the row's length and uses the
// same range of the other as scratch. A single long row splits its first MSD
// level across threads and sorts its buckets in parallel.

// Note [vqsort]
// Where CMake finds Highway (TESSERA_HAVE_VQSORT), rows of at least kVqsortRow
// elements are sorted by its vectorised quicksort (AVX-512 or AVX2, chosen at
// run time):
//   values   float, double and integers of 16 to 64 bits are vqsorted as they
//            are, in the output row where it is contiguous (else in a buffer
//            then scattered). For floats one pass copies the row, finite
//            values to the front in order and NaNs (bits kept, in input order)
//            to the tail, counting infinities and negative zeros; the front is
//            vqsorted, the infinities filled in around it (Highway 1.0.3
//            writes its sentinel, the largest finite value, over +inf), and as
//            vqsort takes -0.0 == +0.0 the run of zeros (found by binary
//            search) is rewritten as the counted -0.0s then the +0.0s: the
//            order of Note [Sort order] with no key encode or decode pass
//            (10^7 float32: 0.121 s against 0.142 s with them, medians of six
//            interleaved runs). float16 and bfloat16 keys (sort_keys.h) are
//            vqsorted in a buffer and decoded into the output;
//   indices  keys of up to 32 bits are packed as (key << 32) | index into
//            uint64 and vqsorted: the pairs are distinct and equal keys order
//            by index, so the result is stable; the low halves are the indices.
// Bytes (one radix pass) and argsort of 64-bit keys stay with the radix sort.
// A single long row is sorted on one thread: vqsort on one core beats the
// parallel radix sort on two (10^7 float32: 0.12 s against 0.33 s). From 128
// elements up vqsort is faster than both std::sort and the radix sort (float32
// rows of 128: 9 ns per element against 29-42; below, its fixed cost of
// about 0.8 us per row dominates).
constexpr int64_t kVqsortRow = 128;

// Per-thread tables, reused by every run (no recursion holds them across a call).
struct RadixTables {
  std::vector<int64_t> count;
  std::vector<uint32_t> fine;
  std::vector<uint8_t> bucket_of;
};
RadixTables& tables() {
  thread_local RadixTables t;
  return t;
}

// LSD radix sort of keys a[0, n) (indices ia when WithIdx) on their bits below
// `hi`, with b / ib as scratch; emit(base + pos, key, index) receives each
// final place.
template <typename K, bool WithIdx, int Bits, typename Emit>
void lsd_sort(K* a, K* b, uint32_t* ia, uint32_t* ib, int64_t n, int hi, int64_t base, const Emit& emit) {
  constexpr int kRadix = 1 << Bits;
  const int passes = (hi + Bits - 1) / Bits;
  std::vector<int64_t>& cv = tables().count;
  cv.assign(int64_t(passes) * kRadix, 0);
  int64_t* count = cv.data();
  for (int64_t i = 0; i < n; ++i) {
    K k = a[i];
    for (int p = 0; p < passes; ++p) ++count[p * kRadix + ((k >> (Bits * p)) & (kRadix - 1))];
  }
  int active[8 * sizeof(K)];
  int na = 0;
  for (int p = 0; p < passes; ++p) {
    if (count[p * kRadix + ((a[0] >> (Bits * p)) & (kRadix - 1))] != n) active[na++] = p;
  }
  if (na == 0) {
    for (int64_t i = 0; i < n; ++i) emit(base + i, a[i], WithIdx ? ia[i] : 0u);
    return;
  }
  for (int j = 0; j < na; ++j) {
    const int shift = Bits * active[j];
    int64_t* c = count + active[j] * kRadix;
    int64_t sum = 0;
    for (int d = 0; d < kRadix; ++d) {
      int64_t t = c[d];
      c[d] = sum;
      sum += t;
    }
    if (j == na - 1) {
      for (int64_t i = 0; i < n; ++i) emit(base + c[(a[i] >> shift) & (kRadix - 1)]++, a[i], WithIdx ? ia[i] : 0u);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      int64_t pos = c[(a[i] >> shift) & (kRadix - 1)]++;
      b[pos] = a[i];
      if constexpr (WithIdx) ib[pos] = ia[i];
    }
    std::swap(a, b);
    if constexpr (WithIdx) std::swap(ia, ib);
  }
}

template <typename K, bool WithIdx, typename Emit>
void leaf_sort(K* a, K* b, uint32_t* ia, uint32_t* ib, int64_t n, int hi, int64_t base, const Emit& emit) {
  if (hi <= 16 || n < 4096) {
    lsd_sort<K, WithIdx, 8>(a, b, ia, ib, n, hi, base, emit);
  } else {
    lsd_sort<K, WithIdx, 11>(a, b, ia, ib, n, hi, base, emit);
  }
}

// One MSD level: the buckets of a run, from the fine histogram of its bits [lo, hi).
struct Buckets {
  int count = 0;
  int64_t start[kBuckets + 1];
  bool single_bin[kBuckets];
};

// Groups the fine bins (tables().fine, `bins` of them, n keys in all) into
// buckets and fills tables().bucket_of.
Buckets group_bins(int64_t n, uint32_t bins) {
  RadixTables& t = tables();
  t.bucket_of.resize(bins);
  // Buckets of about 3/4 of a leaf: most need no second MSD level.
  const int64_t target = std::max((n + kBuckets - 1) / kBuckets, kLeaf * 3 / 4);
  Buckets bk;
  int64_t filled = 0;
  uint32_t first_bin = 0;
  int b = -1;
  for (uint32_t f = 0; f < bins; ++f) {
    const int64_t c = t.fine[f];
    if (c != 0 && (b < 0 || (filled + c > target && b < kBuckets - 1))) {
      if (b >= 0) bk.start[b + 1] = bk.start[b] + filled;
      ++b;
      if (b == 0) bk.start[0] = 0;
      filled = 0;
      first_bin = f;
    }
    if (c != 0) {
      filled += c;
      bk.single_bin[b] = f == first_bin;
    }
    t.bucket_of[f] = static_cast<uint8_t>(std::max(b, 0));
  }
  bk.count = b + 1;
  bk.start[bk.count] = n;
  return bk;
}

// Counts the fine bins of keys in [lo, lo + kFineBits) into `fine` (zeroed first).
template <typename K>
void count_bins(const K* a, int64_t n, int lo, uint32_t bins, uint32_t* fine) {
  std::fill(fine, fine + bins, 0u);
  for (int64_t i = 0; i < n; ++i) ++fine[(a[i] >> lo) & (bins - 1)];
}

// Sorts the run a[0, n) (indices ia), whose keys agree on their bits from
// `hi` up, with b / ib as scratch; the run starts at `base` of the output.
template <typename K, bool WithIdx, typename Emit>
void radix_sort(K* a, K* b, uint32_t* ia, uint32_t* ib, int64_t n, int hi, int64_t base, const Emit& emit) {
  if (n <= kLeaf) {
    leaf_sort<K, WithIdx>(a, b, ia, ib, n, hi, base, emit);
    return;
  }
  const int lo = std::max(0, hi - kFineBits);
  const uint32_t bins = 1u << (hi - lo);
  RadixTables& t = tables();
  t.fine.resize(bins);
  count_bins(a, n, lo, bins, t.fine.data());
  Buckets bk = group_bins(n, bins);
  int64_t off[kBuckets];
  std::copy(bk.start, bk.start + bk.count, off);
  const uint8_t* bucket_of = t.bucket_of.data();
  for (int64_t i = 0; i < n; ++i) {
    int64_t pos = off[bucket_of[(a[i] >> lo) & (bins - 1)]]++;
    b[pos] = a[i];
    if constexpr (WithIdx) ib[pos] = ia[i];
  }
  for (int j = 0; j < bk.count; ++j) {
    const int64_t s = bk.start[j], m = bk.start[j + 1] - s;
    if constexpr (WithIdx) {
      radix_sort<K, true>(b + s, a + s, ib + s, ia + s, m, bk.single_bin[j] ? lo : hi, base + s, emit);
    } else {
      radix_sort<K, false>(b + s, a + s, nullptr, nullptr, m, bk.single_bin[j] ? lo : hi, base + s, emit);
    }
  }
}

// A single long row: the first MSD level split across threads (each counts
// and scatters its slice, after the slices before it, so the order stays
// stable), then the buckets sorted in parallel.
template <typename K, bool WithIdx, typename Emit>
void parallel_radix_sort(K* a, K* b, uint32_t* ia, uint32_t* ib, int64_t n, const Emit& emit) {
  constexpr int hi = 8 * sizeof(K);
  constexpr int lo = hi - kFineBits;
  constexpr uint32_t bins = 1u << kFineBits;
  const int chunks = num_threads();
  auto slice = [&](int c) { return std::pair<int64_t, int64_t>{c * n / chunks, (c + 1) * n / chunks}; };
  std::vector<uint32_t> fine(size_t(chunks) * bins);
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      auto [s, e] = slice(c);
      count_bins(a + s, e - s, lo, bins, fine.data() + c * bins);
    }
  });
  RadixTables& t = tables();
  t.fine.assign(bins, 0);
  for (int c = 0; c < chunks; ++c) {
    for (uint32_t f = 0; f < bins; ++f) t.fine[f] += fine[size_t(c) * bins + f];
  }
  Buckets bk = group_bins(n, bins);
  const std::vector<uint8_t> bucket_of = t.bucket_of;
  // off[c][j]: where slice c writes its next key of bucket j.
  std::vector<int64_t> off(size_t(chunks) * kBuckets, 0);
  for (int c = 0; c < chunks; ++c) {
    for (uint32_t f = 0; f < bins; ++f) off[size_t(c) * kBuckets + bucket_of[f]] += fine[size_t(c) * bins + f];
  }
  for (int j = 0; j < bk.count; ++j) {
    int64_t sum = bk.start[j];
    for (int c = 0; c < chunks; ++c) {
      int64_t m = off[size_t(c) * kBuckets + j];
      off[size_t(c) * kBuckets + j] = sum;
      sum += m;
    }
  }
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      auto [s, e] = slice(c);
      int64_t* o = off.data() + c * kBuckets;
      for (int64_t i = s; i < e; ++i) {
        int64_t pos = o[bucket_of[(a[i] >> lo) & (bins - 1)]]++;
        b[pos] = a[i];
        if constexpr (WithIdx) ib[pos] = static_cast<uint32_t>(i);
      }
    }
  });
  parallel_for(bk.count, 1, [&](int64_t jb, int64_t je) {
    for (int64_t j = jb; j < je; ++j) {
      const int64_t s = bk.start[j], m = bk.start[j + 1] - s;
      if constexpr (WithIdx) {
        radix_sort<K, true>(b + s, a + s, ib + s, ia + s, m, bk.single_bin[j] ? lo : hi, s, emit);
      } else {
        radix_sort<K, false>(b + s, a + s, nullptr, nullptr, m, bk.single_bin[j] ? lo : hi, s, emit);
      }
    }
  });
}

// Scratch from the caching allocator: reused across calls without page faults.
struct Scratch {
  allocator::Buffer buf;
  explicit Scratch(size_t bytes) : buf(allocator::malloc(bytes)) {}
  ~Scratch() { allocator::free(buf); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename U>
  U* at(size_t offset_bytes) const { return reinterpret_cast<U*>(static_cast<char*>(buf.raw_ptr()) + offset_bytes); }
};

// Buffers of one row of n: keys a, b and (with indices) ia, ib.
struct RowBuffers {
  Scratch mem;
  size_t kbytes;
  RowBuffers(int64_t n, size_t key_size, bool with_idx)
      : mem(2 * round_up(n * key_size) + (with_idx ? 2 * round_up(n * 4) : 0)), kbytes(round_up(n * key_size)) {}
  static size_t round_up(size_t b) { return (b + 63) / 64 * 64; }
  template <typename K> K* a() const { return mem.at<K>(0); }
  template <typename K> K* b() const { return mem.at<K>(kbytes); }
  uint32_t* ia() const { return mem.at<uint32_t>(2 * kbytes); }
  uint32_t* ib() const { return mem.at<uint32_t>(2 * kbytes + (mem.buf.size() - 2 * kbytes) / 2); }
};

// Sorts one row xr[i * xs] into out[i * ys] (values, or indices when WithIdx)
// with the buffers of `rb`; `parallel` splits a long row across threads.
template <typename T, bool WithIdx>
void sort_row(const T* xr, int64_t xs, void* out, int64_t ys, int64_t n, const RowBuffers& rb, bool parallel) {
  using Enc = SortKey<T>;
  using K = typename Enc::K;
  K* a = rb.a<K>();
  K* b = rb.b<K>();
  uint32_t* ia = WithIdx ? rb.ia() : nullptr;
  uint32_t* ib = WithIdx ? rb.ib() : nullptr;
  auto encode = [&](int64_t s, int64_t e) {
    if (xs == 1) {
      for (int64_t i = s; i < e; ++i) a[i] = Enc::encode(xr[i]);
    } else {
      for (int64_t i = s; i < e; ++i) a[i] = Enc::encode(xr[i * xs]);
    }
  };
  if (parallel) {
    parallel_for(n, kParallelWork, encode);
  } else {
    encode(0, n);
  }
  if constexpr (WithIdx) {
    if (!parallel) std::iota(ia, ia + n, 0u);  // the parallel scatter numbers them
  }
  auto emit = [&](int64_t pos, K k, uint32_t ix) {
    if constexpr (WithIdx) {
      static_cast<uint32_t*>(out)[pos * ys] = ix;
    } else {
      static_cast<T*>(out)[pos * ys] = Enc::decode(k);
    }
  };
  if constexpr (sizeof(K) >= 4) {
    if (parallel) {
      parallel_radix_sort<K, WithIdx>(a, b, ia, ib, n, emit);
    } else {
      radix_sort<K, WithIdx>(a, b, ia, ib, n, 8 * sizeof(K), 0, emit);
    }
  } else {
    leaf_sort<K, WithIdx>(a, b, ia, ib, n, 8 * sizeof(K), 0, emit);
  }
}

#if TESSERA_HAVE_VQSORT
// One hwy::Sorter per thread: an instance is not thread-safe.
const hwy::Sorter& sorter() {
  thread_local hwy::Sorter s;
  return s;
}

// Types vqsorted as they are for values (Note [vqsort]): float, double and
// integers of 16 to 64 bits.
template <typename T>
constexpr bool kVqsortDirect = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                               (std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) >= 2);

// Sorts values a[0, n) in place (Note [vqsort]), a copied from xr[i * xs] by
// the same call.
template <typename T>
void vqsort_values(const T* xr, int64_t xs, T* a, int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    using K = typename UnsignedOf<sizeof(T)>::type;
    constexpr K kSign = K(K(1) << (8 * sizeof(K) - 1));
    constexpr K kInf = sizeof(T) == 4 ? K(0x7f800000u) : K(0x7ff0000000000000ull);
    // Finite values to the front in order, NaNs from the back (reversed
    // below); infinities and negative zeros counted. Highway 1.0.3's vqsort
    // writes its sentinel, the largest finite value, over +inf, so
    // infinities are left out of the sort and filled in after it.
    int64_t m = 0, tail = n, neg_zeros = 0, neg_inf = 0, pos_inf = 0;
    for (int64_t i = 0; i < n; ++i) {
      T v = xr[i * xs];
      K b;
      memcpy(&b, &v, sizeof(b));
      const K mag = K(b & ~kSign);
      if (mag < kInf) {
        a[m++] = v;
        neg_zeros += b == kSign;
      } else if (mag == kInf) {
        ++((b & kSign) ? neg_inf : pos_inf);
      } else {
        a[--tail] = v;
      }
    }
    std::reverse(a + tail, a + n);
    sorter()(a, static_cast<size_t>(m), hwy::SortAscending());
    if (neg_zeros > 0) {
      // vqsort orders -0.0 and +0.0 as equals: rewrite the run of zeros.
      T* lo = std::lower_bound(a, a + m, T(0));
      T* hi = std::upper_bound(lo, a + m, T(0));
      std::fill(lo, lo + neg_zeros, T(-0.0));
      std::fill(lo + neg_zeros, hi, T(0));
    }
    if (neg_inf > 0) {
      std::memmove(a + neg_inf, a, size_t(m) * sizeof(T));
      std::fill(a, a + neg_inf, -std::numeric_limits<T>::infinity());
    }
    std::fill(a + neg_inf + m, a + tail, std::numeric_limits<T>::infinity());
  } else {
    for (int64_t i = 0; i < n; ++i) a[i] = xr[i * xs];
    sorter()(a, static_cast<size_t>(n), hwy::SortAscending());
  }
}

// Sorts one row xr[i * xs] into out[i * ys] (Note [vqsort]) through `buf`:
// n keys K (or values T) for values, n uint64 (key, index) pairs for indices.
template <typename T, bool WithIdx>
void vqsort_row(const T* xr, int64_t xs, void* out, int64_t ys, int64_t n, void* buf) {
  using Enc = SortKey<T>;
  using K = typename Enc::K;
  if constexpr (WithIdx) {
    uint64_t* a = static_cast<uint64_t*>(buf);
    for (int64_t i = 0; i < n; ++i) a[i] = (uint64_t(Enc::encode(xr[i * xs])) << 32) | uint64_t(i);
    sorter()(a, static_cast<size_t>(n), hwy::SortAscending());
    uint32_t* y = static_cast<uint32_t*>(out);
    for (int64_t i = 0; i < n; ++i) y[i * ys] = static_cast<uint32_t>(a[i]);
  } else if constexpr (kVqsortDirect<T>) {
    T* y = static_cast<T*>(out);
    if (ys == 1) {
      vqsort_values(xr, xs, y, n);
    } else {
      T* a = static_cast<T*>(buf);
      vqsort_values(xr, xs, a, n);
      for (int64_t i = 0; i < n; ++i) y[i * ys] = a[i];
    }
  } else {
    K* a = static_cast<K*>(buf);
    for (int64_t i = 0; i < n; ++i) a[i] = Enc::encode(xr[i * xs]);
    sorter()(a, static_cast<size_t>(n), hwy::SortAscending());
    T* y = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) y[i * ys] = Enc::decode(a[i]);
  }
}

// Sorts (Values) or argsorts (Indices) every row with vqsort_row.
template <typename T, std::enable_if_t<(sizeof(typename SortKey<T>::K) >= 2), int> = 0>
void run_vqsort(const T* x, void* out, const AxisPlan& p, bool with_idx) {
  using K = typename SortKey<T>::K;
  const int64_t n = p.n;
  // Values vqsorted directly into contiguous output rows need no buffer.
  const bool in_place = !with_idx && kVqsortDirect<T> && p.out_stride == 1;
  const size_t bytes = in_place ? 1 : size_t(n) * (with_idx ? sizeof(uint64_t) : sizeof(K));
  auto row = [&](int64_t r, void* buf) {
    const T* xr = x + elem_to_loc(r, p.rest_shape, p.in_strides);
    const int64_t yo = elem_to_loc(r, p.rest_shape, p.out_strides);
    if (with_idx) {
      if constexpr (sizeof(K) <= 4) {
        vqsort_row<T, true>(xr, p.in_stride, static_cast<uint32_t*>(out) + yo, p.out_stride, n, buf);
      }
    } else {
      vqsort_row<T, false>(xr, p.in_stride, static_cast<T*>(out) + yo, p.out_stride, n, buf);
    }
  };
  if (p.rows == 1) {
    Scratch s(bytes);
    row(0, s.at<void>(0));
    return;
  }
  parallel_for(p.rows, std::max<int64_t>(1, kParallelWork / n), [&](int64_t r0, int64_t r1) {
    Scratch s(bytes);
    for (int64_t r = r0; r < r1; ++r) row(r, s.at<void>(0));
  });
}
#endif

template <typename T>
void run_sort(const T* x, void* out, const AxisPlan& p, Sort::Kind kind, int kth) {
  using Enc = SortKey<T>;
  using K = typename Enc::K;
  const int64_t n = p.n;
  if (p.rows == 0 || n == 0) return;
  const bool full = kind == Sort::Values || kind == Sort::Indices;
#if TESSERA_HAVE_VQSORT
  if constexpr (sizeof(K) >= 2) {
    if (full && n >= kVqsortRow && (kind == Sort::Values || sizeof(K) <= 4)) {
      run_vqsort<T>(x, out, p, kind == Sort::Indices);
      return;
    }
  }
#endif
  if (full && n >= kShortRow) {
    const bool with_idx = kind == Sort::Indices;
    if (p.rows == 1) {
      RowBuffers rb(n, sizeof(K), with_idx);
      const bool parallel = n > 4 * kLeaf && num_threads() > 1;
      if (with_idx) {
        sort_row<T, true>(x, p.in_stride, out, p.out_stride, n, rb, parallel);
      } else {
        sort_row<T, false>(x, p.in_stride, out, p.out_stride, n, rb, parallel);
      }
      return;
    }
    parallel_for(p.rows, std::max<int64_t>(1, kParallelWork / n), [&](int64_t r0, int64_t r1) {
      RowBuffers rb(n, sizeof(K), with_idx);
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + elem_to_loc(r, p.rest_shape, p.in_strides);
        const int64_t yo = elem_to_loc(r, p.rest_shape, p.out_strides);
        if (with_idx) {
          sort_row<T, true>(xr, p.in_stride, static_cast<uint32_t*>(out) + yo, p.out_stride, n, rb, false);
        } else {
          sort_row<T, false>(xr, p.in_stride, static_cast<T*>(out) + yo, p.out_stride, n, rb, false);
        }
      }
    });
    return;
  }
  const bool with_idx = kind != Sort::Values;
  const int64_t grain = std::max<int64_t>(1, kParallelWork / n);
  parallel_for(p.rows, grain, [&](int64_t rb, int64_t re) {
    // Uninitialized buffers, reused by every row of the chunk.
    auto keys = std::make_unique_for_overwrite<K[]>(n);
    auto idx = std::make_unique_for_overwrite<uint32_t[]>(with_idx ? n : 0);
    K* k = keys.get();
    uint32_t* ix = idx.get();
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + elem_to_loc(r, p.rest_shape, p.in_strides);
      const int64_t yo = elem_to_loc(r, p.rest_shape, p.out_strides);
      const int64_t xs = p.in_stride, ys = p.out_stride;
      for (int64_t i = 0; i < n; ++i) k[i] = Enc::encode(xr[i * xs]);
      if (kind == Sort::Values) {
        std::sort(k, k + n);
        T* y = static_cast<T*>(out) + yo;
        for (int64_t i = 0; i < n; ++i) y[i * ys] = Enc::decode(k[i]);
        continue;
      }
      std::iota(ix, ix + n, 0u);
      if (kind == Sort::Indices) {
        std::stable_sort(ix, ix + n, [&](uint32_t a, uint32_t b) { return k[a] < k[b]; });
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
