// What a Compiled node means in terms of the ops it fuses: the table of
// fusable primitives, the program run as those primitives again, and the
// transform rules, which differentiate and vectorize that original graph
// (Note [Fused programs] in ops/primitives/compiled.h).
#include <stdexcept>
#include <typeinfo>

#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/binary.h"
#include "tessera/ops/primitives/compiled.h"
#include "tessera/ops/primitives/copy.h"
#include "tessera/ops/primitives/unary.h"
#include "tessera/ops/rules/composite.h"
#include "tessera/transforms/transforms.h"

namespace tessera {

int fused_arity(FusedOp op) {
  switch (op) {
#define TESSERA_FUSED_ROW(NAME, FN, RULE) case FusedOp::NAME:
    TESSERA_UNARY_OPS(TESSERA_FUSED_ROW)
    case FusedOp::Round:
    case FusedOp::NanToNum:
    case FusedOp::AsType:
    case FusedOp::Broadcast:
    case FusedOp::Copy:
      return 1;
    TESSERA_BINARY_OPS(TESSERA_FUSED_ROW)
    case FusedOp::Equal:
    case FusedOp::EqualNan:
    case FusedOp::IsClose:
      return 2;
#undef TESSERA_FUSED_ROW
    case FusedOp::Select:
      return 3;
  }
  throw std::logic_error("[Compiled] unknown fused op (bug)");
}

const char* fused_op_name(FusedOp op) {
  switch (op) {
#define TESSERA_FUSED_ROW(NAME, FN, RULE) \
  case FusedOp::NAME:                     \
    return #NAME;
    TESSERA_UNARY_OPS(TESSERA_FUSED_ROW)
    TESSERA_BINARY_OPS(TESSERA_FUSED_ROW)
#undef TESSERA_FUSED_ROW
    case FusedOp::Equal: return "Equal";
    case FusedOp::EqualNan: return "EqualNan";
    case FusedOp::Round: return "Round";
    case FusedOp::NanToNum: return "NanToNum";
    case FusedOp::IsClose: return "IsClose";
    case FusedOp::Select: return "Select";
    case FusedOp::AsType: return "AsType";
    case FusedOp::Broadcast: return "Broadcast";
    case FusedOp::Copy: return "Copy";
  }
  throw std::logic_error("[Compiled] unknown fused op (bug)");
}

std::optional<FusedOp> fused_op_of(const Primitive& p) {
  const std::type_info& t = typeid(p);
#define TESSERA_FUSED_ROW(NAME, FN, RULE) \
  if (t == typeid(NAME)) return FusedOp::NAME;
  TESSERA_UNARY_OPS(TESSERA_FUSED_ROW)
  TESSERA_BINARY_OPS(TESSERA_FUSED_ROW)
#undef TESSERA_FUSED_ROW
  if (t == typeid(Equal)) {
    return std::get<0>(static_cast<const Equal&>(p).parameters()) ? FusedOp::EqualNan
                                                                   : FusedOp::Equal;
  }
  if (t == typeid(Round)) return FusedOp::Round;
  if (t == typeid(NanToNum)) return FusedOp::NanToNum;
  if (t == typeid(IsClose)) return FusedOp::IsClose;
  if (t == typeid(Select)) return FusedOp::Select;
  if (t == typeid(AsType)) return FusedOp::AsType;
  if (t == typeid(Broadcast)) return FusedOp::Broadcast;
  if (t == typeid(Copy)) return FusedOp::Copy;
  return std::nullopt;
}

std::vector<double> fused_params(FusedOp op, const Primitive& p, Dtype dtype) {
  switch (op) {
    case FusedOp::Round:
      return {double(std::get<0>(static_cast<const Round&>(p).parameters()))};
    case FusedOp::NanToNum: {
      // As NanToNum's kernels: an unset infinity is the dtype's largest / lowest value.
      auto [nan, posinf, neginf] = static_cast<const NanToNum&>(p).parameters();
      finfo info(dtype);
      return {double(nan), posinf ? double(*posinf) : info.max,
              neginf ? double(*neginf) : info.min};
    }
    case FusedOp::IsClose: {
      auto [rtol, atol, equal_nan] = static_cast<const IsClose&>(p).parameters();
      return {rtol, atol, equal_nan ? 1.0 : 0.0};
    }
    default:
      return {};
  }
}

void Compiled::print(std::ostream& os) const {
  os << "Compiled(";
  for (size_t i = 0; i < program_.steps.size(); ++i) {
    os << (i ? ", " : "") << fused_op_name(program_.steps[i].op);
  }
  os << ")";
}

std::vector<array> Compiled::unfused(const std::vector<array>& inputs) const {
  std::vector<array> regs(inputs.begin(), inputs.end());
  for (const FusedStep& step : program_.steps) {
    std::vector<array> args;
    for (uint32_t r : step.args) args.push_back(regs[r]);
    regs.emplace_back(program_.shape, step.dtype, step.primitive, std::move(args));
  }
  std::vector<array> outputs;
  for (uint32_t r : program_.output_registers()) outputs.push_back(regs[r]);
  return outputs;
}

std::vector<array> Compiled::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<array>&) {
  auto fun = [this](const std::vector<array>& x) { return unfused(x); };
  return rules::composite_vjp(fun, primals, cotangents, argnums);
}

std::vector<array> Compiled::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  auto fun = [this](const std::vector<array>& x) { return unfused(x); };
  return rules::composite_jvp(fun, primals, tangents, argnums, stream());
}

std::pair<std::vector<array>, std::vector<int>> Compiled::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  auto fun = [this](const std::vector<array>& x) { return unfused(x); };
  std::vector<int> out_axes(program_.output_registers().size(), 0);
  return {tessera::vmap(fun, axes, out_axes)(inputs), out_axes};
}

}  // namespace tessera
