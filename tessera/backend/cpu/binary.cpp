// eval_cpu of the binary elementwise primitives: one generic kernel, templated
// on the scalar functor of backend/common/elementwise.h, plus Select and AllTrue.
//
// The kernel picks one case per call: scalar-scalar, scalar-vector,
// vector-scalar, vector-vector (dense inputs of one layout: a linear loop,
// cpu::binary_span, vectorised for the machine and split across threads) or
// general strided (collapsed dimensions, with the same loops per row). A dense input used for
// the last time donates its buffer to the output (see Note [Donation]).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "tessera/core/dispatch.h"
#include "tessera/backend/common/elementwise.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/select.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/backend/cpu/vector_math.h"
#include "tessera/ops/primitives/binary.h"

namespace tessera {

namespace {

constexpr int64_t kGrain = 1 << 16;

// The stored output type of Op on In (see elementwise.h).
template <typename Op, typename In>
using binary_result_t = decltype(std::declval<Op>()(std::declval<tessera::compute_t<In>>(),
                                                    std::declval<tessera::compute_t<In>>()));
template <typename Op, typename In>
using binary_out_t =
    std::conditional_t<std::is_same_v<binary_result_t<Op, In>, tessera::compute_t<In>>, In,
                       binary_result_t<Op, In>>;

template <typename Out, typename Op, typename In>
inline Out apply(const Op& op, In a, In b) {
  using C = tessera::compute_t<In>;
  return static_cast<Out>(op(static_cast<C>(a), static_cast<C>(b)));
}

template <typename Op, typename In, typename Out>
void loop_vv(const In* a, const In* b, Out* out, int64_t n, const Op& op) {
  cpu::binary_span(a, b, out, n, cpu::Operands::vectors, op);
}

template <typename Op, typename In, typename Out>
void loop_sv(In a, const In* b, Out* out, int64_t n, const Op& op) {
  cpu::binary_span(&a, b, out, n, cpu::Operands::scalar_vector, op);
}

template <typename Op, typename In, typename Out>
void loop_vs(const In* a, In b, Out* out, int64_t n, const Op& op) {
  cpu::binary_span(a, &b, out, n, cpu::Operands::vector_scalar, op);
}

// Allocates out with the layout of the dense array `like`.
template <typename Out>
void allocate_like(array& out, const array& like) {
  out.set_data(allocator::malloc(like.data_size() * sizeof(Out)), like.data_size(),
               like.strides(), like.flags());
}

template <typename Op, typename T>
void binary_typed(const array& a, const array& b, array& out, const Op& op, bool donate) {
  using Out = binary_out_t<Op, T>;
  if (detail::exact_dtype<Out> != out.dtype()) {
    throw std::logic_error("[binary] output dtype " + dtype_name(out.dtype()) +
                           " does not match the kernel's (bug)");
  }
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  auto donor = [&](const array& x) { return std::is_same_v<T, Out> && donate && x.is_donatable(); };
  const bool a_scalar = a.data_size() == 1, b_scalar = b.data_size() == 1;
  const bool a_dense = a.flags().contiguous, b_dense = b.flags().contiguous;

  if (a_scalar && b_scalar) {
    // One element, seen through a's strides (a has the output's shape).
    const Out r = apply<Out>(op, pa[0], pb[0]);
    if (donor(a)) {
      out.move_shared_buffer(a);
    } else if (donor(b)) {
      out.move_shared_buffer(b);
    } else {
      out.set_data(allocator::malloc(sizeof(Out)), 1, a.strides(), a.flags());
    }
    out.data<Out>()[0] = r;
    return;
  }
  if (a_scalar && b_dense) {
    donor(b) ? out.move_shared_buffer(b) : allocate_like<Out>(out, b);
    Out* o = out.data<Out>();
    T sa = pa[0];
    cpu::parallel_for(static_cast<int64_t>(b.data_size()), kGrain, [&](int64_t lo, int64_t hi) {
      loop_sv(sa, pb + lo, o + lo, hi - lo, op);
    });
    return;
  }
  if (a_dense && b_scalar) {
    donor(a) ? out.move_shared_buffer(a) : allocate_like<Out>(out, a);
    Out* o = out.data<Out>();
    T sb = pb[0];
    cpu::parallel_for(static_cast<int64_t>(a.data_size()), kGrain, [&](int64_t lo, int64_t hi) {
      loop_vs(pa + lo, sb, o + lo, hi - lo, op);
    });
    return;
  }
  if (a_dense && b_dense && a.strides() == b.strides()) {
    if (donor(a)) {
      out.move_shared_buffer(a);
    } else if (donor(b)) {
      out.move_shared_buffer(b);
    } else {
      allocate_like<Out>(out, a);
    }
    Out* o = out.data<Out>();
    cpu::parallel_for(static_cast<int64_t>(a.data_size()), kGrain, [&](int64_t lo, int64_t hi) {
      loop_vv(pa + lo, pb + lo, o + lo, hi - lo, op);
    });
    return;
  }

  // General: row-contiguous output over collapsed dimensions.
  if (a.flags().row_contiguous && donor(a)) {
    out.move_shared_buffer(a);
  } else if (b.flags().row_contiguous && donor(b)) {
    out.move_shared_buffer(b);
  } else {
    out.set_data(allocator::malloc(out.nbytes()));
  }
  Out* o = out.data<Out>();
  auto collapsed =
      tessera::collapse_contiguous_dims(out.shape(), {a.strides(), b.strides(), out.strides()});
  const Shape& shape = collapsed.first;
  const std::array<Strides, 3> strides{collapsed.second[0], collapsed.second[1],
                                       collapsed.second[2]};
  int64_t row = std::max<int64_t>(shape.back(), 1);
  cpu::parallel_for(
      tessera::num_rows(shape), std::max<int64_t>(1, kGrain / row), [&](int64_t lo, int64_t hi) {
        tessera::for_each_row<3>(shape, strides, lo, hi,
                             [&](const std::array<int64_t, 3>& off, int64_t n,
                                 const std::array<int64_t, 3>& inc) {
                               const T* ra = pa + off[0];
                               const T* rb = pb + off[1];
                               Out* ro = o + off[2];
                               if (inc[2] == 1 && inc[0] == 1 && inc[1] == 1) {
                                 loop_vv(ra, rb, ro, n, op);
                               } else if (inc[2] == 1 && inc[0] == 0 && inc[1] == 1) {
                                 loop_sv(*ra, rb, ro, n, op);
                               } else if (inc[2] == 1 && inc[0] == 1 && inc[1] == 0) {
                                 loop_vs(ra, *rb, ro, n, op);
                               } else {
                                 for (int64_t i = 0; i < n; ++i) {
                                   ro[i * inc[2]] = apply<Out>(op, ra[i * inc[0]], rb[i * inc[1]]);
                                 }
                               }
                             });
      });
}

// Dispatches once on the (common) input dtype; see Note [Supported types].
template <typename Op>
void binary_op(const array& a, const array& b, array& out, const Op& op, const Primitive& p,
               bool donate = true) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  dispatch_supported<Op>(a.dtype(), p.name(), [&](auto tag) {
    binary_typed<Op, typename decltype(tag)::type>(a, b, out, op, donate);
  });
}

// condition ? x : y; moves bytes only, so one instantiation per element width.
template <typename T>
void select_typed(const array& c, const array& x, const array& y, array& out) {
  const bool* pc = c.data<bool>();
  const T* px = x.data<T>();
  const T* py = y.data<T>();
  bool dense = c.flags().contiguous && x.flags().contiguous && y.flags().contiguous &&
               c.strides() == x.strides() && x.strides() == y.strides();
  if (dense) {
    if (x.is_donatable()) {
      out.move_shared_buffer(x);
    } else if (y.is_donatable()) {
      out.move_shared_buffer(y);
    } else {
      allocate_like<T>(out, x);
    }
    T* o = out.data<T>();
    cpu::parallel_for(static_cast<int64_t>(x.data_size()), kGrain, [&](int64_t lo, int64_t hi) {
      cpu::select_row(pc + lo, px + lo, py + lo, o + lo, hi - lo, {1, 1, 1, 1});
    });
    return;
  }
  // x or y written over in place where it is dense and not needed again
  // (attention's scores under a broadcast mask).
  auto dense_donor = [&](const array& a) {
    return a.flags().row_contiguous && a.data_size() == a.size() && a.is_donatable();
  };
  if (dense_donor(x)) {
    out.move_shared_buffer(x);
  } else if (dense_donor(y)) {
    out.move_shared_buffer(y);
  } else {
    out.set_data(allocator::malloc(out.nbytes()));
  }
  T* o = out.data<T>();
  auto collapsed = tessera::collapse_contiguous_dims(
      out.shape(), {c.strides(), x.strides(), y.strides(), out.strides()});
  const Shape& shape = collapsed.first;
  const std::array<Strides, 4> strides{collapsed.second[0], collapsed.second[1],
                                       collapsed.second[2], collapsed.second[3]};
  int64_t row = std::max<int64_t>(shape.back(), 1);
  cpu::parallel_for(
      tessera::num_rows(shape), std::max<int64_t>(1, kGrain / row), [&](int64_t lo, int64_t hi) {
        tessera::for_each_row<4>(shape, strides, lo, hi,
                             [&](const std::array<int64_t, 4>& off, int64_t n,
                                 const std::array<int64_t, 4>& inc) {
                               cpu::select_row(pc + off[0], px + off[1], py + off[2],
                                               o + off[3], n, inc);
                             });
      });
}

}  // namespace

#define TESSERA_EVAL eval_cpu
#include "tessera/backend/common/binary_eval.inc"
#undef TESSERA_EVAL

void Select::eval_cpu(const std::vector<array>& inputs, array& out) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  tessera::dispatch_bytes(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    select_typed<T>(inputs[0], inputs[1], inputs[2], out);
  });
}

void AllTrue::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  bool all = true;
  if (in.size() > 0) {
    const bool* p = in.data<bool>();
    if (in.flags().contiguous || in.data_size() == 1) {
      all = std::memchr(p, 0, in.data_size()) == nullptr;
    } else {
      auto collapsed = tessera::collapse_contiguous_dims(in.shape(), {in.strides()});
      tessera::for_each_row<1>(collapsed.first, {collapsed.second[0]}, 0,
                           tessera::num_rows(collapsed.first),
                           [&](const std::array<int64_t, 1>& off, int64_t n,
                               const std::array<int64_t, 1>& inc) {
                             for (int64_t i = 0; all && i < n; ++i) all = p[off[0] + i * inc[0]];
                           });
    }
  }
  out.set_data(allocator::malloc(sizeof(bool)));
  out.data<bool>()[0] = all;
}

}  // namespace tessera
