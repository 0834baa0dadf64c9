#include "tessera/transforms/compile.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tessera/core/primitive.h"
#include "tessera/ops/ops.h"
#include "tessera/transforms/tape.h"

namespace tessera {

namespace {

std::atomic<CompileMode> g_mode{std::getenv("MLX_DISABLE_COMPILE") ? CompileMode::disabled
                                                                   : CompileMode::enabled};

// Where a recorded node finds an input: the compiled function's input, a
// constant, or an output of an earlier node.
struct Ref {
  enum Kind : uint8_t { input, constant, node } kind;
  uint32_t index;     // into inputs, constants or nodes
  uint32_t position;  // the output of a node
  bool operator==(const Ref& o) const {
    return kind == o.kind && index == o.index && position == o.position;
  }
};

struct RecordedNode {
  std::shared_ptr<Primitive> primitive;
  std::vector<Ref> inputs;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  bool multi;  // made by array::make_arrays (Node::outputs not empty)
};

struct Record {
  std::vector<RecordedNode> nodes;
  std::vector<array> constants;
  std::vector<Ref> outputs;
};

// The cache key: the default stream, then each input's dtype and shape.
std::vector<int64_t> signature(const std::vector<array>& inputs) {
  Stream s = to_stream(std::monostate{});
  std::vector<int64_t> key{s.index, static_cast<int64_t>(inputs.size())};
  for (const auto& x : inputs) {
    key.push_back(static_cast<int64_t>(x.dtype().val));
    key.push_back(static_cast<int64_t>(x.ndim()));
    key.insert(key.end(), x.shape().begin(), x.shape().end());
  }
  return key;
}

// Same primitive and parameters on the same inputs, with the same outputs.
bool same_node(const RecordedNode& a, const RecordedNode& b) {
  return a.inputs == b.inputs && a.shapes == b.shapes && a.dtypes == b.dtypes &&
         a.multi == b.multi && a.primitive->stream() == b.primitive->stream() &&
         std::strcmp(a.primitive->name(), b.primitive->name()) == 0 &&
         a.primitive->is_equivalent(*b.primitive);
}

size_t hash_node(const RecordedNode& n) {
  size_t h = std::hash<std::string_view>()(n.primitive->name());
  for (const auto& r : n.inputs) {
    h = h * 1000003u ^ (size_t(r.kind) << 60 ^ size_t(r.index) << 20 ^ r.position);
  }
  return h;
}

Record trace(const VecFn& fun, const std::vector<array>& inputs, bool simplify) {
  std::vector<array> placeholders;
  std::unordered_set<std::uintptr_t> cut;
  std::unordered_map<std::uintptr_t, Ref> refs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array p = detail::placeholder(inputs[i].shape(), inputs[i].dtype(), "compile");
    cut.insert(p.id());
    refs.emplace(p.id(), Ref{Ref::input, static_cast<uint32_t>(i), 0});
    placeholders.push_back(std::move(p));
  }

  array::TracingScope tracing;
  std::vector<array> outputs = fun(placeholders);

  Record rec;
  std::unordered_map<std::uintptr_t, uint32_t> constant_index;
  auto ref_of = [&](const array& a) {
    auto r = refs.find(a.id());
    if (r != refs.end()) return r->second;
    auto [c, added] = constant_index.emplace(a.id(), static_cast<uint32_t>(rec.constants.size()));
    if (added) rec.constants.push_back(a);
    return Ref{Ref::constant, c->second, 0};
  };
  std::unordered_multimap<size_t, uint32_t> seen;  // hash -> node index
  for (const array& a : detail::trace_tape(outputs, cut)) {
    const auto* node = a.node();
    RecordedNode rn;
    rn.primitive = a.primitive_ptr();
    for (const auto& in : a.inputs()) rn.inputs.push_back(ref_of(in));
    rn.multi = !node->outputs.empty();
    std::vector<array> outs = rn.multi ? a.outputs() : std::vector<array>{a};
    for (const auto& o : outs) {
      rn.shapes.push_back(o.shape());
      rn.dtypes.push_back(o.dtype());
    }
    uint32_t index = static_cast<uint32_t>(rec.nodes.size());
    if (simplify) {
      size_t h = hash_node(rn);
      auto [lo, hi] = seen.equal_range(h);
      for (auto it = lo; it != hi; ++it) {
        if (same_node(rec.nodes[it->second], rn)) {
          index = it->second;
          break;
        }
      }
      if (index == rec.nodes.size()) seen.emplace(h, index);
    }
    if (index == rec.nodes.size()) rec.nodes.push_back(std::move(rn));
    for (size_t k = 0; k < outs.size(); ++k) {
      refs.emplace(outs[k].id(), Ref{Ref::node, index, static_cast<uint32_t>(k)});
    }
  }
  for (const auto& o : outputs) rec.outputs.push_back(ref_of(o));
  return rec;
}

std::vector<array> replay(const Record& rec, const std::vector<array>& inputs) {
  std::vector<std::vector<array>> values(rec.nodes.size());
  auto value = [&](const Ref& r) -> const array& {
    switch (r.kind) {
      case Ref::input:
        return inputs[r.index];
      case Ref::constant:
        return rec.constants[r.index];
      default:
        return values[r.index][r.position];
    }
  };
  for (size_t i = 0; i < rec.nodes.size(); ++i) {
    const auto& n = rec.nodes[i];
    std::vector<array> ins;
    ins.reserve(n.inputs.size());
    for (const auto& r : n.inputs) ins.push_back(value(r));
    if (n.multi) {
      values[i] = array::make_arrays(n.shapes, n.dtypes, n.primitive, ins);
    } else {
      values[i].push_back(array(n.shapes[0], n.dtypes[0], n.primitive, std::move(ins)));
    }
  }
  std::vector<array> outputs;
  outputs.reserve(rec.outputs.size());
  for (const auto& r : rec.outputs) outputs.push_back(value(r));
  return outputs;
}

struct Cache {
  std::mutex mutex;
  std::map<std::pair<std::vector<int64_t>, bool>, std::shared_ptr<const Record>> records;
};

}  // namespace

VecFn compile(VecFn fun, bool /*shapeless: traced again per shape, Note [compile]*/) {
  auto cache = std::make_shared<Cache>();
  return [fun = std::move(fun), cache](const std::vector<array>& inputs) {
    CompileMode mode = g_mode.load(std::memory_order_relaxed);
    if (mode == CompileMode::disabled) return fun(inputs);
    const bool simplify = mode != CompileMode::no_simplify;
    auto key = std::make_pair(signature(inputs), simplify);
    std::shared_ptr<const Record> rec;
    {
      std::lock_guard l(cache->mutex);
      auto it = cache->records.find(key);
      if (it != cache->records.end()) rec = it->second;
    }
    if (!rec) {
      rec = std::make_shared<const Record>(trace(fun, inputs, simplify));
      std::lock_guard l(cache->mutex);
      cache->records.emplace(key, rec);
    }
    return replay(*rec, inputs);
  };
}

VecFn compile(std::vector<array> (*fun)(const std::vector<array>&), bool shapeless) {
  if (!fun) throw std::invalid_argument("[compile] the function is null");
  return compile(VecFn(fun), shapeless);
}

void disable_compile() { g_mode = CompileMode::disabled; }
void enable_compile() { g_mode = CompileMode::enabled; }
void set_compile_mode(CompileMode mode) { g_mode = mode; }
CompileMode compile_mode() { return g_mode.load(); }

}  // namespace tessera
