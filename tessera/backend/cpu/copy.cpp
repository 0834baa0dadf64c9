#include "tessera/backend/cpu/copy.h"

#include "tessera/backend/common/views.h"

#include <algorithm>
#include <cstring>

#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"

namespace tessera::cpu {

namespace {

template <typename In, typename Out>
void cast_loop(const In* src, Out* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = cast_to<Out>(src[i]);
}

// Note [Transposed copies]
// When the source is dense along one axis and the destination along another (a
// transpose), a row-by-row copy walks one side with a large stride and touches a
// new cache line per element. Copying in kTile x kTile tiles keeps the lines of
// both sides in L1 while the tile is moved; tiles run in parallel by strips.
constexpr int64_t kTile = 32;

template <typename In, typename Out>
bool transposed_copy(const In* src, Out* dst, const Shape& shape, const Strides& in_strides,
                     const Strides& out_strides) {
  const int nd = static_cast<int>(shape.size());
  if (nd < 2 || (in_strides[nd - 1] == 1 && out_strides[nd - 1] == 1)) return false;
  auto plan = views::transpose_plan(shape, in_strides, out_strides, 8);
  if (!plan) return false;
  const int a = plan->a, b = plan->b;
  const Shape& outer = plan->outer;
  const Strides &outer_in = plan->outer_in, &outer_out = plan->outer_out;
  const int64_t na = shape[a], nb = shape[b];
  const int64_t in_b = in_strides[b], out_a = out_strides[a];
  const int64_t strips = (na + kTile - 1) / kTile;
  const int64_t jobs = int64_t(shape_size(outer)) * strips;
  parallel_for(jobs, std::max<int64_t>(1, (1 << 16) / (kTile * nb)), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t o = t / strips;
      int64_t a0 = (t % strips) * kTile, a1 = std::min(na, a0 + kTile);
      const In* s = src + elem_to_loc(o, outer, outer_in);
      Out* d = dst + elem_to_loc(o, outer, outer_out);
      for (int64_t b0 = 0; b0 < nb; b0 += kTile) {
        int64_t b1 = std::min(nb, b0 + kTile);
        for (int64_t i = a0; i < a1; ++i) {
          const In* si = s + i;
          Out* di = d + i * out_a;
          for (int64_t j = b0; j < b1; ++j) di[j] = cast_to<Out>(si[j * in_b]);
        }
      }
    }
  });
  return true;
}

template <typename In, typename Out>
void strided_copy(const In* src, Out* dst, const Shape& shape, const Strides& in_strides,
                  const Strides& out_strides) {
  auto [cshape, cstrides] = collapse_contiguous_dims(shape, {in_strides, out_strides});
  if (transposed_copy(src, dst, cshape, cstrides[0], cstrides[1])) return;
  int64_t rows = num_rows(cshape);
  int64_t row_len = cshape.back();
  parallel_for(rows, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(row_len, 1)),
               [&, &cshape = cshape, &cstrides = cstrides](int64_t b, int64_t e) {
                 for_each_row<2>(cshape, {cstrides[0], cstrides[1]}, b, e,
                                 [&](const std::array<int64_t, 2>& off, int64_t n,
                                     const std::array<int64_t, 2>& inc) {
                                   const In* s = src + off[0];
                                   Out* d = dst + off[1];
                                   if (inc[0] == 1 && inc[1] == 1) {
                                     cast_loop(s, d, n);
                                   } else if (inc[0] == 0) {
                                     Out v = cast_to<Out>(*s);
                                     for (int64_t i = 0; i < n; ++i) d[i * inc[1]] = v;
                                   } else {
                                     for (int64_t i = 0; i < n; ++i) {
                                       d[i * inc[1]] = cast_to<Out>(s[i * inc[0]]);
                                     }
                                   }
                                 });
               });
}

}  // namespace

void cast_contiguous(const void* src, Dtype src_t, void* dst, Dtype dst_t, size_t n) {
  const size_t in_size = src_t.size, out_size = dst_t.size;
  parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
    tessera::cast_contiguous(static_cast<const char*>(src) + b * in_size, src_t,
                             static_cast<char*>(dst) + b * out_size, dst_t,
                             static_cast<size_t>(e - b));
  });
}

void copy_into(const array& in, array& out) {
  if (in.shape() != out.shape()) {
    throw std::logic_error("[copy_into] shapes differ (bug in the caller)");
  }
  if (in.size() == 0) return;
  const void* src = in.raw_data();
  void* dst = out.mutable_data();
  if (in.dtype() == out.dtype()) {
    if (in.flags().row_contiguous && out.flags().row_contiguous) {
      // Large copies (an imported NumPy array into pinned memory) in parallel
      // parts: one core's memcpy does not reach the memory's bandwidth.
      const int64_t bytes = static_cast<int64_t>(in.nbytes());
      parallel_for(bytes, int64_t{4} << 20, [&](int64_t b, int64_t e) {
        std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b,
                    static_cast<size_t>(e - b));
      });
      return;
    }
    dispatch_bytes(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      strided_copy(static_cast<const T*>(src), static_cast<T*>(dst), in.shape(), in.strides(),
                   out.strides());
    });
    return;
  }
  dispatch_all(in.dtype(), [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    dispatch_all(out.dtype(), [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      strided_copy(static_cast<const In*>(src), static_cast<Out*>(dst), in.shape(),
                   in.strides(), out.strides());
    });
  });
}

void copy_to_row_contiguous(const array& in, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  copy_into(in, out);
}

array ensure_row_contiguous(const array& in) {
  if (in.flags().row_contiguous) return in;
  array out(in.shape(), in.dtype(), nullptr, {});
  copy_to_row_contiguous(in, out);
  return out;
}

}  // namespace tessera::cpu
