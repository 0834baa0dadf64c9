// eval_cpu of the indexing primitives (Note [Index arrays] in
// ops/primitives/indexing.h: out-of-range indices gather zeros and scatter
// nothing).
#include <cmath>
#include <cstring>
#include <limits>

#include "tessera/backend/cpu/copy.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/memory/allocator.h"
#include "tessera/ops/primitives/indexing.h"

namespace tessera {

namespace {

// v as an in-range index of a window of w on an axis of extent n, or -1.
inline int64_t in_range(int64_t v, int64_t n, int64_t w) {
  if (v < 0) v += n;
  return (v >= 0 && v <= n - w) ? v : -1;
}

// Element offsets of the row-major positions of a window of `shape` in an
// array of `strides`.
std::vector<int64_t> window_offsets(const Shape& shape, const Strides& strides) {
  std::vector<int64_t> off(shape_size(shape));
  for (size_t j = 0; j < off.size(); ++j) off[j] = tessera::elem_to_loc(j, shape, strides);
  return off;
}

// Marks an index tuple out of range: a window's offset itself may be negative
// (a view with a negative stride).
constexpr int64_t kOutOfRange = std::numeric_limits<int64_t>::min();

// The per-index starts of Gather and Scatter: for index tuple i, the element
// offset of its window in an array of `strides`, or kOutOfRange.
struct IndexTuples {
  std::vector<const void*> data;
  std::vector<Strides> strides;
  Shape shape;
  std::vector<int64_t> extent, window, step;
  bool dense = true;

  IndexTuples(const std::vector<array>& idx, const std::vector<int>& axes, const Shape& extents,
              const Shape& windows, const Strides& arr_strides) {
    if (!idx.empty()) shape = idx[0].shape();
    for (size_t k = 0; k < idx.size(); ++k) {
      data.push_back(idx[k].data<void>());
      strides.push_back(idx[k].strides());
      dense = dense && idx[k].flags().row_contiguous;
      extent.push_back(extents[axes[k]]);
      window.push_back(windows[axes[k]]);
      step.push_back(arr_strides[axes[k]]);
    }
  }

  template <typename I>
  int64_t start(int64_t i) const {
    int64_t base = 0;
    for (size_t k = 0; k < data.size(); ++k) {
      int64_t loc = dense ? i : tessera::elem_to_loc(i, shape, strides[k]);
      int64_t v = in_range(static_cast<const I*>(data[k])[loc], extent[k], window[k]);
      if (v < 0) return kOutOfRange;
      base += v * step[k];
    }
    return base;
  }
};

// out = a as a row-contiguous array, a's buffer reused when it can be.
void copy_or_donate(const array& a, array& out) {
  if (a.is_donatable() && a.flags().row_contiguous && a.data_size() == a.size()) {
    array donor = a;
    out.move_shared_buffer(donor);
  } else {
    cpu::copy_to_row_contiguous(a, out);
  }
}

// The combination of a scatter's reduction, in T's compute type.
template <typename T>
struct Combine {
  using C = tessera::compute_t<T>;
  static T apply(Scatter::ReduceType type, T a, T b) {
    C x = static_cast<C>(a), y = static_cast<C>(b);
    switch (type) {
      case Scatter::None: return b;
      case Scatter::Sum: return tessera::cast_to<T>(x + y);
      case Scatter::Prod: return tessera::cast_to<T>(x * y);
      case Scatter::Max:
        if constexpr (!tessera::is_complex_v<T>) return (y != y || y > x) ? b : a;
        break;
      case Scatter::Min:
        if constexpr (!tessera::is_complex_v<T>) return (y != y || y < x) ? b : a;
        break;
    }
    return b;
  }
};

}  // namespace

void Gather::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  std::vector<array> idx(inputs.begin() + 1, inputs.end());
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  IndexTuples tuples(idx, axes_, a.shape(), slice_sizes_, a.strides());
  const auto offsets = window_offsets(slice_sizes_, a.strides());
  const int64_t w = static_cast<int64_t>(offsets.size());
  const int64_t n = static_cast<int64_t>(out.size()) / w;
  Dtype it = idx.empty() ? int32 : idx[0].dtype();
  tessera::dispatch_bytes(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(it, [&](auto itag) {
      using I = typename decltype(itag)::type;
      const T* src = a.data<T>();
      T* dst = out.data<T>();
      cpu::parallel_for(n, std::max<int64_t>(1, (1 << 15) / w), [&](int64_t b, int64_t e) {
        if (w == 1 && tuples.data.size() == 1 && tuples.dense) {
          const I* ip = static_cast<const I*>(tuples.data[0]);
          const int64_t ext = tuples.extent[0], st = tuples.step[0], o0 = offsets[0];
          for (int64_t i = b; i < e; ++i) {
            int64_t v = in_range(ip[i], ext, 1);
            dst[i] = v < 0 ? T(0) : src[o0 + v * st];
          }
          return;
        }
        for (int64_t i = b; i < e; ++i) {
          int64_t base = tuples.template start<I>(i);
          T* o = dst + i * w;
          if (base == kOutOfRange) {
            std::fill(o, o + w, T(0));
          } else {
            for (int64_t j = 0; j < w; ++j) o[j] = src[base + offsets[j]];
          }
        }
      });
    });
  });
}

void Scatter::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  std::vector<array> idx(inputs.begin() + 1, inputs.end() - 1);
  const array upd = cpu::ensure_row_contiguous(inputs.back());
  copy_or_donate(a, out);
  size_t k = upd.ndim() - a.ndim();
  Shape window(upd.shape().begin() + k, upd.shape().end());
  IndexTuples tuples(idx, axes_, out.shape(), window, out.strides());
  const auto offsets = window_offsets(window, out.strides());
  const int64_t w = static_cast<int64_t>(offsets.size());
  if (w == 0) return;
  const int64_t n = static_cast<int64_t>(upd.size()) / w;
  Dtype it = idx.empty() ? int32 : idx[0].dtype();
  auto type = type_;
  tessera::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(it, [&](auto itag) {
      using I = typename decltype(itag)::type;
      const T* u = upd.data<T>();
      T* dst = out.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        int64_t base = tuples.template start<I>(i);
        if (base == kOutOfRange) continue;
        for (int64_t j = 0; j < w; ++j) {
          T& o = dst[base + offsets[j]];
          o = Combine<T>::apply(type, o, u[i * w + j]);
        }
      }
    });
  });
}

void GatherAxis::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& idx = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  Strides a_strides = a.strides();
  const int64_t step = a_strides[axis_], extent = a.shape(axis_);
  a_strides[axis_] = 0;
  auto [shape, strides] =
      tessera::collapse_contiguous_dims(out.shape(), {a_strides, idx.strides(), out.strides()});
  std::array<Strides, 3> st{strides[0], strides[1], strides[2]};
  const int64_t rows = tessera::num_rows(shape);
  const int64_t row_len = shape.empty() ? 1 : shape.back();
  tessera::dispatch_bytes(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      const T* src = a.data<T>();
      const I* ip = idx.data<I>();
      T* dst = out.data<T>();
      cpu::parallel_for(rows, std::max<int64_t>(1, (1 << 15) / row_len), [&](int64_t b, int64_t e) {
        tessera::for_each_row<3>(shape, st, b, e,
                             [&](const std::array<int64_t, 3>& off, int64_t m,
                                 const std::array<int64_t, 3>& inc) {
                               for (int64_t i = 0; i < m; ++i) {
                                 int64_t v = in_range(ip[off[1] + i * inc[1]], extent, 1);
                                 dst[off[2] + i * inc[2]] =
                                     v < 0 ? T(0) : src[off[0] + i * inc[0] + v * step];
                               }
                             });
      });
    });
  });
}

void ScatterAxis::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& idx = inputs[1];
  const array& upd = inputs[2];
  copy_or_donate(inputs[0], out);
  Strides o_strides = out.strides();
  const int64_t step = o_strides[axis_], extent = out.shape(axis_);
  o_strides[axis_] = 0;
  auto [shape, strides] =
      tessera::collapse_contiguous_dims(upd.shape(), {upd.strides(), idx.strides(), o_strides});
  std::array<Strides, 3> st{strides[0], strides[1], strides[2]};
  const bool sum = type_ == Sum;
  tessera::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      const T* u = upd.data<T>();
      const I* ip = idx.data<I>();
      T* dst = out.data<T>();
      tessera::for_each_row<3>(shape, st, 0, tessera::num_rows(shape),
                           [&](const std::array<int64_t, 3>& off, int64_t m,
                               const std::array<int64_t, 3>& inc) {
                             for (int64_t i = 0; i < m; ++i) {
                               int64_t v = in_range(ip[off[1] + i * inc[1]], extent, 1);
                               if (v < 0) continue;
                               T& o = dst[off[2] + i * inc[2] + v * step];
                               T x = u[off[0] + i * inc[0]];
                               o = sum ? Combine<T>::apply(Scatter::Sum, o, x) : x;
                             }
                           });
    });
  });
}

void MaskedScatter::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& mask = inputs[1];
  const array src = cpu::ensure_row_contiguous(inputs[2]);
  copy_or_donate(inputs[0], out);
  const int64_t available = static_cast<int64_t>(src.size());
  auto [shape, strides] = tessera::collapse_contiguous_dims(mask.shape(), {mask.strides()});
  std::array<Strides, 1> st{strides[0]};
  tessera::dispatch_bytes(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* m = mask.data<bool>();
    const T* s = src.data<T>();
    T* dst = out.data<T>();
    int64_t pos = 0, used = 0;
    tessera::for_each_row<1>(shape, st, 0, tessera::num_rows(shape),
                         [&](const std::array<int64_t, 1>& off, int64_t n,
                             const std::array<int64_t, 1>& inc) {
                           for (int64_t i = 0; i < n; ++i, ++pos) {
                             if (m[off[0] + i * inc[0]] && used++ < available) {
                               dst[pos] = s[used - 1];
                             }
                           }
                         });
  });
}

}  // namespace tessera
