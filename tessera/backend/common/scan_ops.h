// The operations of Scan, shared by both backends: for each, the identity it
// starts from (init) and the step that adds an element to the running value
// (step), on accumulators of type A; T is the stored element type that the
// kernels load and store, C the type its arithmetic is computed in (float for
// 16-bit floats; the backend's compute type).
//
//   visit_scan_op<T, C>(type_, [&](auto op) { run_scan<decltype(op)>(...); });
//
// Sum and Prod accumulate signed integers in the unsigned type of their
// width, so that they wrap without undefined behaviour; NaN wins in Max and
// Min, as in the reductions.
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "tessera/core/dispatch.h"
#include "tessera/ops/primitives/scan.h"

namespace tessera::scan_ops {

// C, or for a signed integer C the unsigned type of its width.
template <typename C>
inline constexpr bool is_signed_int_v =
    std::is_integral_v<C> && std::is_signed_v<C> && !std::is_same_v<C, bool>;
template <typename C>
using wrap_t =
    std::conditional_t<is_signed_int_v<C>,
                       std::make_unsigned_t<std::conditional_t<is_signed_int_v<C>, C, int>>, C>;

template <typename T_, typename C>
struct Sum {
  using T = T_;
  using A = wrap_t<C>;
  TESSERA_HD static A init() { return A{}; }
  TESSERA_HD static A step(A a, A x) {
    if constexpr (std::is_same_v<A, bool>) {
      return a || x;
    } else {
      return a + x;
    }
  }
};

template <typename T_, typename C>
struct Prod {
  using T = T_;
  using A = wrap_t<C>;
  TESSERA_HD static A init() {
    if constexpr (std::is_arithmetic_v<A>) {
      return A(1);
    } else {
      return A{1.0f, 0.0f};  // complex
    }
  }
  TESSERA_HD static A step(A a, A x) {
    if constexpr (std::is_same_v<A, bool>) {
      return a && x;
    } else {
      return a * x;
    }
  }
};

template <typename T_, typename C, bool IsMax>
struct Extremum {
  using T = T_;
  using A = C;
  TESSERA_HD static A init() {
    if constexpr (std::numeric_limits<A>::has_infinity) {
      return IsMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    } else {
      return IsMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
    }
  }
  TESSERA_HD static A step(A a, A x) {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a) return a;
      return ((IsMax ? x > a : x < a) || x != x) ? x : a;
    } else {
      return (IsMax ? x > a : x < a) ? x : a;
    }
  }
};

template <typename T_, typename C>
struct LogAddExp {
  using T = T_;
  using A = C;
  TESSERA_HD static A init() { return -std::numeric_limits<A>::infinity(); }
  TESSERA_HD static A step(A a, A x) {
    if (a != a || x != x) return a != a ? a : x;
    if (a == x) return a + static_cast<A>(0.6931471805599453);  // also +-inf
    A m = a > x ? a : x;
    A d = a > x ? x - a : a - x;
    return m + std::log1p(std::exp(d));
  }
};

// Calls run(Op{}) with the operation of `type` on elements T computed in C.
// The op function rejects complex max / min / logaddexp and integer
// logaddexp scans, so those are bugs here.
template <typename T, typename C, typename F>
void visit_scan_op(Scan::ReduceType type, F&& run) {
  switch (type) {
    case Scan::Sum: return run(Sum<T, C>{});
    case Scan::Prod: return run(Prod<T, C>{});
    case Scan::Max:
    case Scan::Min:
    case Scan::LogAddExp:
      if constexpr (!std::is_arithmetic_v<C>) {
        throw std::logic_error("[Scan] complex input reached a max/min/logaddexp scan (bug)");
      } else {
        if (type == Scan::Max) return run(Extremum<T, C, true>{});
        if (type == Scan::Min) return run(Extremum<T, C, false>{});
        if constexpr (std::is_floating_point_v<C>) {
          return run(LogAddExp<T, C>{});
        } else {
          throw std::logic_error("[Scan] integer logaddexp scan (bug)");
        }
      }
  }
}

}  // namespace tessera::scan_ops
