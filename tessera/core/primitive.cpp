#include "tessera/core/primitive.h"

#include <sstream>
#include <stdexcept>

namespace tessera {

void throw_no_implementation(const Primitive& p, const char* backend) {
  std::ostringstream msg;
  msg << "[" << p.name() << "] has no " << backend << " implementation";
  throw std::runtime_error(msg.str());
}

void Primitive::eval_gpu(const std::vector<array>&, std::vector<array>&) {
  throw_no_implementation(*this, "GPU");
}

void UnaryPrimitive::eval_gpu(const std::vector<array>&, array&) {
  throw_no_implementation(*this, "GPU");
}

std::vector<array> Primitive::jvp(const std::vector<array>&, const std::vector<array>&,
                                  const std::vector<int>&) {
  throw_no_implementation(*this, "jvp");
}

std::vector<array> Primitive::vjp(const std::vector<array>&, const std::vector<array>&,
                                  const std::vector<int>&, const std::vector<array>&) {
  throw_no_implementation(*this, "vjp");
}

std::pair<std::vector<array>, std::vector<int>> Primitive::vmap(const std::vector<array>&,
                                                                const std::vector<int>&) {
  throw_no_implementation(*this, "vmap");
}

std::vector<Shape> Primitive::output_shapes(const std::vector<array>&) {
  throw_no_implementation(*this, "output_shapes");
}

}  // namespace tessera
