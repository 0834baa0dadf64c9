// eval_cpu of the unary elementwise primitives: one generic kernel, templated
// on the scalar functor of backend/common/elementwise.h.
#include <algorithm>
#include <string>

#include "tessera/core/dispatch.h"
#include "tessera/backend/common/elementwise.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/backend/cpu/vector_math.h"
#include "tessera/ops/primitives/unary.h"

namespace tessera {

namespace {

constexpr int64_t kGrain = 1 << 16;

// The stored output type of Op on In: the functor's result, except that a
// result of In's compute type is stored as In (16-bit floats stay 16-bit).
template <typename Op, typename In>
using unary_out_t = std::conditional_t<
    std::is_same_v<decltype(std::declval<Op>()(std::declval<tessera::compute_t<In>>())),
                   tessera::compute_t<In>>,
    In, decltype(std::declval<Op>()(std::declval<tessera::compute_t<In>>()))>;

// A row of n elements at strides inc: through buffers of kRowChunk elements,
// so that every element goes through unary_span and so has the same value as
// in a dense array (Note [Vector math]).
template <typename Op, typename In, typename Out>
void unary_strided_row(const In* s, Out* d, int64_t n, int64_t in_inc, int64_t out_inc,
                       const Op& op) {
  constexpr int64_t kRowChunk = 256;
  In a[kRowChunk];
  Out b[kRowChunk];
  for (int64_t c = 0; c < n; c += kRowChunk) {
    const int64_t m = std::min(kRowChunk, n - c);
    for (int64_t i = 0; i < m; ++i) a[i] = s[(c + i) * in_inc];
    cpu::unary_span(a, b, m, op);
    for (int64_t i = 0; i < m; ++i) d[(c + i) * out_inc] = b[i];
  }
}

template <typename Op, typename In>
void unary_typed(const array& in, array& out, const Op& op) {
  using Out = unary_out_t<Op, In>;
  if (detail::exact_dtype<Out> != out.dtype()) {
    throw std::logic_error("[unary] output dtype " + dtype_name(out.dtype()) +
                           " does not match the kernel's (bug)");
  }
  const In* src = in.data<In>();
  if (in.flags().contiguous) {
    // Dense input in any axis order: one linear pass, the output keeps the layout.
    int64_t n = static_cast<int64_t>(in.data_size());
    if (std::is_same_v<In, Out> && in.is_donatable()) {
      out.move_shared_buffer(in);
    } else {
      out.set_data(allocator::malloc(n * sizeof(Out)), in.data_size(), in.strides(), in.flags());
    }
    Out* dst = out.data<Out>();
    cpu::parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
      cpu::unary_span(src + b, dst + b, e - b, op);
    });
    return;
  }
  out.set_data(allocator::malloc(out.nbytes()));
  Out* dst = out.data<Out>();
  auto collapsed = tessera::collapse_contiguous_dims(in.shape(), {in.strides(), out.strides()});
  const Shape& shape = collapsed.first;
  const std::array<Strides, 2> strides{collapsed.second[0], collapsed.second[1]};
  int64_t row = std::max<int64_t>(shape.back(), 1);
  cpu::parallel_for(tessera::num_rows(shape), std::max<int64_t>(1, kGrain / row),
                    [&](int64_t b, int64_t e) {
                      tessera::for_each_row<2>(
                          shape, strides, b, e,
                          [&](const std::array<int64_t, 2>& off, int64_t n,
                              const std::array<int64_t, 2>& inc) {
                            const In* s = src + off[0];
                            Out* d = dst + off[1];
                            if (inc[0] == 1 && inc[1] == 1) {
                              cpu::unary_span(s, d, n, op);
                            } else {
                              unary_strided_row(s, d, n, inc[0], inc[1], op);
                            }
                          });
                    });
}

// Dispatches once on the input dtype; see Note [Supported types].
template <typename Op>
void unary_op(const array& in, array& out, const Op& op, const Primitive& p) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  dispatch_supported<Op>(in.dtype(), p.name(), [&](auto tag) {
    unary_typed<Op, typename decltype(tag)::type>(in, out, op);
  });
}

}  // namespace

#define TESSERA_EVAL eval_cpu
#include "tessera/backend/common/unary_eval.inc"
#undef TESSERA_EVAL

}  // namespace tessera
