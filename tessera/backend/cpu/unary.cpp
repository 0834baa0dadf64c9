// eval_cpu of the unary elementwise primitives: one generic kernel, templated
// on the scalar functor of backend/cpu/elementwise.h.
#include <algorithm>
#include <string>

#include "tessera/backend/cpu/dispatch.h"
#include "tessera/backend/cpu/elementwise.h"
#include "tessera/backend/cpu/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/unary.h"

namespace tessera {

namespace {

constexpr int64_t kGrain = 1 << 16;

// The stored output type of Op on In: the functor's result, except that a
// result of In's compute type is stored as In (16-bit floats stay 16-bit).
template <typename Op, typename In>
using unary_out_t = std::conditional_t<
    std::is_same_v<decltype(std::declval<Op>()(std::declval<cpu::compute_t<In>>())),
                   cpu::compute_t<In>>,
    In, decltype(std::declval<Op>()(std::declval<cpu::compute_t<In>>()))>;

template <typename Op, typename In, typename Out>
void unary_loop(const In* in, Out* out, int64_t n, const Op& op) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<Out>(op(static_cast<cpu::compute_t<In>>(in[i])));
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
  auto collapsed = cpu::collapse_contiguous_dims(in.shape(), {in.strides(), out.strides()});
  const Shape& shape = collapsed.first;
  const std::array<Strides, 2> strides{collapsed.second[0], collapsed.second[1]};
  int64_t row = std::max<int64_t>(shape.back(), 1);
  cpu::parallel_for(cpu::num_rows(shape), std::max<int64_t>(1, kGrain / row),
                    [&](int64_t b, int64_t e) {
                      cpu::for_each_row<2>(
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
                                  op(static_cast<cpu::compute_t<In>>(s[i * inc[0]])));
                            }
                          });
                    });
}

// Dispatches once on the input dtype; see Note [Supported types].
template <typename Op>
void unary_op(const array& in, array& out, const Op& op, const char* name) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  cpu::dispatch_all(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Op::template supports<cpu::compute_t<T>>) {
      unary_typed<Op, T>(in, out, op);
    } else {
      throw std::invalid_argument(std::string("[") + name + "] is not defined for dtype " +
                                  dtype_name(in.dtype()));
    }
  });
}

}  // namespace

#define TESSERA_UNARY_EVAL(NAME)                                              \
  void NAME::eval_cpu(const std::vector<array>& inputs, array& out) {         \
    unary_op(inputs[0], out, cpu::NAME{}, name());                            \
  }

TESSERA_UNARY_EVAL(Abs)
TESSERA_UNARY_EVAL(Negative)
TESSERA_UNARY_EVAL(Sign)
TESSERA_UNARY_EVAL(LogicalNot)
TESSERA_UNARY_EVAL(Reciprocal)
TESSERA_UNARY_EVAL(Floor)
TESSERA_UNARY_EVAL(Ceil)
TESSERA_UNARY_EVAL(Trunc)
TESSERA_UNARY_EVAL(Square)
TESSERA_UNARY_EVAL(Exp)
TESSERA_UNARY_EVAL(Expm1)
TESSERA_UNARY_EVAL(Sqrt)
TESSERA_UNARY_EVAL(Rsqrt)
TESSERA_UNARY_EVAL(Sin)
TESSERA_UNARY_EVAL(Cos)
TESSERA_UNARY_EVAL(Tan)
TESSERA_UNARY_EVAL(ArcSin)
TESSERA_UNARY_EVAL(ArcCos)
TESSERA_UNARY_EVAL(ArcTan)
TESSERA_UNARY_EVAL(Sinh)
TESSERA_UNARY_EVAL(Cosh)
TESSERA_UNARY_EVAL(Tanh)
TESSERA_UNARY_EVAL(ArcSinh)
TESSERA_UNARY_EVAL(ArcCosh)
TESSERA_UNARY_EVAL(ArcTanh)
TESSERA_UNARY_EVAL(Degrees)
TESSERA_UNARY_EVAL(Radians)
TESSERA_UNARY_EVAL(Log)
TESSERA_UNARY_EVAL(Log2)
TESSERA_UNARY_EVAL(Log10)
TESSERA_UNARY_EVAL(Log1p)
TESSERA_UNARY_EVAL(Sigmoid)
TESSERA_UNARY_EVAL(Erf)
TESSERA_UNARY_EVAL(ErfInv)
TESSERA_UNARY_EVAL(Conjugate)
TESSERA_UNARY_EVAL(Real)
TESSERA_UNARY_EVAL(Imag)
TESSERA_UNARY_EVAL(BitwiseInvert)
TESSERA_UNARY_EVAL(IsNan)
TESSERA_UNARY_EVAL(IsInf)
TESSERA_UNARY_EVAL(IsFinite)
TESSERA_UNARY_EVAL(IsPosInf)
TESSERA_UNARY_EVAL(IsNegInf)
#undef TESSERA_UNARY_EVAL

void Round::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::Round op;
  op.decimals = decimals_;
  unary_op(inputs[0], out, op, name());
}

void NanToNum::eval_cpu(const std::vector<array>& inputs, array& out) {
  finfo info(out.dtype());
  cpu::NanToNum op;
  op.nan = nan_;
  op.posinf = posinf_ ? double(*posinf_) : info.max;
  op.neginf = neginf_ ? double(*neginf_) : info.min;
  unary_op(inputs[0], out, op, name());
}

void StopGradient::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.copy_shared_buffer(inputs[0]);
}

}  // namespace tessera
