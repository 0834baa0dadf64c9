#include "tessera/backend/cpu/copy.h"

#include <cstring>

#include "tessera/backend/cpu/dispatch.h"
#include "tessera/backend/cpu/strided.h"
#include "tessera/backend/cpu/threading.h"

namespace tessera::cpu {

namespace {

template <typename In, typename Out>
void cast_loop(const In* src, Out* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = cast_to<Out>(src[i]);
}

template <typename In, typename Out>
void strided_copy(const In* src, Out* dst, const Shape& shape, const Strides& in_strides,
                  const Strides& out_strides) {
  auto [cshape, cstrides] = collapse_contiguous_dims(shape, {in_strides, out_strides});
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
  if (src_t == dst_t) {
    std::memcpy(dst, src, n * src_t.size);
    return;
  }
  dispatch_all(src_t, [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    dispatch_all(dst_t, [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      const In* s = static_cast<const In*>(src);
      Out* d = static_cast<Out*>(dst);
      parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
        cast_loop(s + b, d + b, static_cast<size_t>(e - b));
      });
    });
  });
}

void copy_into(const array& in, array& out) {
  if (in.shape() != out.shape()) {
    throw std::logic_error("[copy_into] shapes differ (bug in the caller)");
  }
  if (in.size() == 0) return;
  const void* src = in.raw_data();
  void* dst = out.raw_data();
  if (in.dtype() == out.dtype()) {
    if (in.flags().row_contiguous && out.flags().row_contiguous) {
      std::memcpy(dst, src, in.nbytes());
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
