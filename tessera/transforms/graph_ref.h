// How a recorded graph (compile's records, export's traces) names a node's
// inputs, and how a replay finds them.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tessera/core/array.h"

namespace tessera::detail {

// Where a recorded node finds an input: an input of the function, a constant,
// or an output of an earlier node.
struct GraphRef {
  enum Kind : uint8_t { input, constant, node } kind;
  uint32_t index;     // into the inputs, the constants or the nodes
  uint32_t position;  // the output of a node
  bool operator==(const GraphRef& o) const {
    return kind == o.kind && index == o.index && position == o.position;
  }
};

// What r names among the inputs, the constants and the nodes' outputs
// (values[i]: node i's; during a replay, arrays; when printing, names).
template <typename V>
const V& resolve(const GraphRef& r, const std::vector<V>& inputs, const std::vector<V>& constants,
                 const std::vector<std::vector<V>>& values) {
  switch (r.kind) {
    case GraphRef::input:
      return inputs[r.index];
    case GraphRef::constant:
      return constants[r.index];
    default:
      return values[r.index][r.position];
  }
}

// The refs of a graph being recorded: what set() named (the inputs'
// placeholders, the outputs of recorded nodes), and every other array met, as
// a constant appended to `constants` once.
class GraphRefs {
 public:
  explicit GraphRefs(std::vector<array>& constants) : constants_(constants) {}

  void set(const array& a, GraphRef r) { refs_.insert_or_assign(a.id(), r); }

  GraphRef of(const array& a) {
    auto r = refs_.find(a.id());
    if (r != refs_.end()) return r->second;
    auto [c, added] = constant_index_.emplace(a.id(), static_cast<uint32_t>(constants_.size()));
    if (added) constants_.push_back(a);
    return GraphRef{GraphRef::constant, c->second, 0};
  }

 private:
  std::unordered_map<std::uintptr_t, GraphRef> refs_;
  std::unordered_map<std::uintptr_t, uint32_t> constant_index_;
  std::vector<array>& constants_;
};

}  // namespace tessera::detail
