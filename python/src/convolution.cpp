// Convolutions: the C++ ops, with an int or a tuple
// (one int per spatial dimension) for stride, padding and dilation.
#include "convert.h"

namespace tessera::python {

namespace {

// padding of conv_general: an int, one int per spatial dimension, or a pair
// (low list, high list).
using Padding = std::variant<int, std::vector<int>, std::pair<std::vector<int>, std::vector<int>>>;

std::vector<int> per_dim(const IntOrVec& v, int n, const char* op, const char* name) {
  if (auto* i = std::get_if<int>(&v)) return std::vector<int>(n, *i);
  const auto& vec = std::get<std::vector<int>>(v);
  if (static_cast<int>(vec.size()) != n) {
    throw std::invalid_argument(std::string("[") + op + "] " + name + " must be an int or " +
                                std::to_string(n) + " ints, got " + ints_str(vec));
  }
  return vec;
}

// conv{n}d and conv_transpose{n}d of the C++ API, from one int per dimension.
array conv_nd(int n, const array& x, const array& w, const std::vector<int>& st,
              const std::vector<int>& pd, const std::vector<int>& dl, int groups,
              StreamOrDevice s) {
  if (n == 1) return conv1d(x, w, st[0], pd[0], dl[0], groups, s);
  if (n == 2) return conv2d(x, w, {st[0], st[1]}, {pd[0], pd[1]}, {dl[0], dl[1]}, groups, s);
  return conv3d(x, w, {st[0], st[1], st[2]}, {pd[0], pd[1], pd[2]}, {dl[0], dl[1], dl[2]},
                groups, s);
}

array conv_transpose_nd(int n, const array& x, const array& w, const std::vector<int>& st,
                        const std::vector<int>& pd, const std::vector<int>& dl,
                        const std::vector<int>& op, int groups, StreamOrDevice s) {
  if (n == 1) return conv_transpose1d(x, w, st[0], pd[0], dl[0], op[0], groups, s);
  if (n == 2) {
    return conv_transpose2d(x, w, {st[0], st[1]}, {pd[0], pd[1]}, {dl[0], dl[1]},
                            {op[0], op[1]}, groups, s);
  }
  return conv_transpose3d(x, w, {st[0], st[1], st[2]}, {pd[0], pd[1], pd[2]},
                          {dl[0], dl[1], dl[2]}, {op[0], op[1], op[2]}, groups, s);
}

}  // namespace

void init_convolution(nb::module_& m) {
  auto kw = nb::kw_only();
  static const char* const convs[] = {"conv1d", "conv2d", "conv3d"};
  static const char* const transposed[] = {"conv_transpose1d", "conv_transpose2d",
                                            "conv_transpose3d"};
  for (int n = 1; n <= 3; ++n) {
    const char* op = convs[n - 1];
    def(m, op, [n, op](nb::handle input, nb::handle weight, const IntOrVec& stride,
                       const IntOrVec& padding, const IntOrVec& dilation, int groups,
                       StreamArg s) {
      return conv_nd(n, to_array(input), to_array(weight), per_dim(stride, n, op, "stride"),
                     per_dim(padding, n, op, "padding"), per_dim(dilation, n, op, "dilation"),
                     groups, s);
    }, "input"_a, "weight"_a, pos_only(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
          "groups"_a = 1, kw, "stream"_a = nb::none());
    const char* top = transposed[n - 1];
    def(m, top, [n, top](nb::handle input, nb::handle weight, const IntOrVec& stride,
                         const IntOrVec& padding, const IntOrVec& dilation,
                         const IntOrVec& output_padding, int groups, StreamArg s) {
      return conv_transpose_nd(n, to_array(input), to_array(weight),
                               per_dim(stride, n, top, "stride"),
                               per_dim(padding, n, top, "padding"),
                               per_dim(dilation, n, top, "dilation"),
                               per_dim(output_padding, n, top, "output_padding"), groups, s);
    }, "input"_a, "weight"_a, pos_only(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
          "output_padding"_a = 0, "groups"_a = 1, kw, "stream"_a = nb::none());
  }

  def(m, "conv_general", [](nb::handle input, nb::handle weight, const IntOrVec& stride,
                            const Padding& padding, const IntOrVec& kernel_dilation,
                            const IntOrVec& input_dilation, int groups, bool flip, StreamArg s) {
    std::vector<int> lo, hi;
    if (auto* p = std::get_if<std::pair<std::vector<int>, std::vector<int>>>(&padding)) {
      lo = p->first;
      hi = p->second;
    } else if (auto* i = std::get_if<int>(&padding)) {
      lo = hi = {*i};
    } else {
      lo = hi = std::get<std::vector<int>>(padding);
    }
    return conv_general(to_array(input), to_array(weight), to_vec(stride), lo, hi,
                        to_vec(kernel_dilation), to_vec(input_dilation), groups, flip, s);
  }, "input"_a, "weight"_a, pos_only(), "stride"_a = 1, "padding"_a = 0,
        "kernel_dilation"_a = 1, "input_dilation"_a = 1, "groups"_a = 1, "flip"_a = false, kw,
        "stream"_a = nb::none());

  def(m, "convolve", [](nb::handle a, nb::handle v, const std::string& mode, StreamArg s) {
    return convolve(to_array(a), to_array(v), mode, s);
  }, "a"_a, "v"_a, pos_only(), "mode"_a = "full", kw, "stream"_a = nb::none());
}

}  // namespace tessera::python
