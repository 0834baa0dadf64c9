#include "tessera/core/print.h"

#include <atomic>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/core/dispatch.h"

namespace tessera {

namespace {

std::atomic<int> g_precision{-1};

constexpr size_t kSummaryThreshold = 1000;  // more elements than this: summarise
constexpr int kEdgeItems = 3;               // entries kept at each end of a long axis

void print_real(std::ostream& os, double v, int precision) {
  if (std::isnan(v)) {
    os << "nan";
    return;
  }
  std::ostringstream ss;
  if (precision >= 0) {
    ss << std::fixed << std::setprecision(precision) << v;
  } else {
    ss << std::setprecision(6) << v;
  }
  os << ss.str();
}

template <typename T>
void print_scalar(std::ostream& os, T v, int precision) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "True" : "False");
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    os << static_cast<int64_t>(v);
  } else if constexpr (std::is_integral_v<T>) {
    os << static_cast<uint64_t>(v);
  } else if constexpr (tessera::is_complex_v<T>) {
    // MLX's form: 1+2j, with "-" only for a negative imaginary part.
    print_real(os, v.real(), precision);
    os << (v.imag() < 0 ? "-" : "+");
    print_real(os, std::abs(v.imag()), precision);
    os << "j";
  } else {
    print_real(os, static_cast<double>(static_cast<tessera::compute_t<T>>(v)), precision);
  }
}

// The nested brackets of a non-empty array, walked with a stack of open
// brackets (one per dimension) rather than recursion: arrays of any number
// of dimensions print.
template <typename T>
void print_axes(std::ostream& os, const T* data, const array& a, bool summarise, int precision) {
  struct Open {
    int i;        // next index along the bracket's dimension
    int64_t loc;  // element offset of its index 0
  };
  const size_t nd = a.ndim();
  std::vector<Open> open{{0, 0}};
  os << "[";
  while (!open.empty()) {
    const size_t dim = open.size() - 1;
    const int n = a.shape()[dim];
    const bool last = dim == nd - 1;
    Open& o = open.back();
    if (o.i == n) {
      os << "]";
      open.pop_back();
      if (!open.empty()) {
        Open& up = open.back();
        if (up.i < a.shape()[open.size() - 1] - 1) os << ",\n";
        ++up.i;
      }
      continue;
    }
    if (o.i > 0 && !last) os << std::string(7 + dim, ' ');
    if (summarise && n > 2 * kEdgeItems && o.i == kEdgeItems) {
      os << "..." << (last ? ", " : ",\n");
      o.i = n - kEdgeItems;
      continue;
    }
    const int64_t loc = o.loc + o.i * a.strides()[dim];
    if (last) {
      print_scalar(os, data[loc], precision);
      if (o.i < n - 1) os << ", ";
      ++o.i;
    } else {
      os << "[";
      open.push_back({0, loc});
    }
  }
}

// An array with no elements, as MLX prints it: nested brackets down to the
// first axis of length 0 (or the last axis), laid out like print_axis.
void print_empty(std::ostream& os, const array& a, int dim) {
  const int n = a.shape(dim);
  if (n == 0 || dim == static_cast<int>(a.ndim()) - 1) {
    os << "[]";
    return;
  }
  os << "[";
  for (int i = 0; i < n; ++i) {
    if (i > 0) os << ",\n" << std::string(7 + dim, ' ');
    print_empty(os, a, dim + 1);
  }
  os << "]";
}

}  // namespace

void set_printoptions(int precision) {
  if (precision > kMaxPrecision) {
    throw std::invalid_argument("[set_printoptions] precision " + std::to_string(precision) +
                                " is more than the " + std::to_string(kMaxPrecision) +
                                " digits it may be");
  }
  g_precision.store(precision < 0 ? -1 : precision);
}

PrintOptions get_printoptions() { return PrintOptions{g_precision.load()}; }

std::ostream& operator<<(std::ostream& os, const array& a) {
  array x = a;
  x.eval();
  os << "array(";
  if (x.size() == 0) {
    print_empty(os, x, 0);
  } else {
    const int precision = g_precision.load();
    tessera::dispatch_all(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* data = x.data<T>();
      if (x.ndim() == 0) {
        print_scalar(os, data[0], precision);
      } else {
        print_axes(os, data, x, x.size() > kSummaryThreshold, precision);
      }
    });
  }
  os << ", dtype=" << dtype_name(x.dtype()) << ")";
  return os;
}

}  // namespace tessera
