// eval_cpu of the unary elementwise primitives: one generic kernel, templated
// on the scalar functor of backend/common/elementwise.h.
#include <algorithm>
#include <string>

#include "tessera/core/dispatch.h"
#include "tessera/backend/common/elementwise.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"
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

template <typename Op, typename In, typename Out>
void unary_loop(const In* in, Out* out, int64_t n, const Op& op) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<Out>(op(static_cast<tessera::compute_t<In>>(in[i])));
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
      unary_loop(src + b, dst + b, e - b, op);
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
                              unary_loop(s, d, n, op);
                              return;
                            }
                            for (int64_t i = 0; i < n; ++i) {
                              d[i * inc[1]] = static_cast<Out>(
                                  op(static_cast<tessera::compute_t<In>>(s[i * inc[0]])));
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
