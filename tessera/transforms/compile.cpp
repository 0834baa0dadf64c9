#include "tessera/transforms/compile.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tessera/core/primitive.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/compiled.h"
#include "tessera/transforms/graph_ref.h"
#include "tessera/transforms/tape.h"

namespace tessera {

namespace {

std::atomic<CompileMode> g_mode{std::getenv("MLX_DISABLE_COMPILE") ? CompileMode::disabled
                                                                   : CompileMode::enabled};

using Ref = detail::GraphRef;

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

// How many compile traces this thread is inside. A compiled function called
// within another's trace runs its function as it is: the outer record then
// holds its primitives, and fusion sees them beside their neighbours (a
// compiled silu inside a compiled swiglu becomes one fused node, not two).
thread_local int t_compile_traces = 0;

struct CompileTraceScope {
  CompileTraceScope() { ++t_compile_traces; }
  ~CompileTraceScope() { --t_compile_traces; }
  CompileTraceScope(const CompileTraceScope&) = delete;
  CompileTraceScope& operator=(const CompileTraceScope&) = delete;
};

Record trace(const VecFn& fun, const std::vector<array>& inputs, bool simplify) {
  CompileTraceScope inside;
  Record rec;
  detail::GraphRefs refs(rec.constants);
  std::vector<array> placeholders;
  std::unordered_set<std::uintptr_t> cut;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array p = detail::placeholder(inputs[i].shape(), inputs[i].dtype(), "compile");
    cut.insert(p.id());
    refs.set(p, Ref{Ref::input, static_cast<uint32_t>(i), 0});
    placeholders.push_back(std::move(p));
  }

  array::TracingScope tracing;
  std::vector<array> outputs = fun(placeholders);

  std::unordered_multimap<size_t, uint32_t> seen;  // hash -> node index
  for (const array& a : detail::trace_tape(outputs, cut)) {
    const auto* node = a.node();
    RecordedNode rn;
    rn.primitive = a.primitive_ptr();
    for (const auto& in : a.inputs()) rn.inputs.push_back(refs.of(in));
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
      refs.set(outs[k], Ref{Ref::node, index, static_cast<uint32_t>(k)});
    }
  }
  for (const auto& o : outputs) rec.outputs.push_back(refs.of(o));
  return rec;
}

// Note [Fusion]
// After the trace, maximal sets of elementwise nodes become one Compiled node
// (ops/primitives/compiled.h). A set grows from a root, the last node of the
// record not yet in a set, towards its inputs: an input node joins when it is
// fusable, has the root's shape and stream, and every read of it is by a
// member (so no path leaves the set and comes back: the set is free of
// cycles). An output of the function may join on the same terms, since
// nothing reads it outside: it becomes one more output of the node (an
// optimizer's update writes the parameter and its moments in one pass, as
// MLX's compile does). A Broadcast joins too
// when its own input stays outside: the fused kernel reads that input
// broadcast. A Copy joins as a renaming. Sets of fewer than two ops that
// compute stay as they are; a set never ends in a renaming. Sets of one
// shape then join in groups, one Compiled node each (siblings, below). On the
// GPU, sets with complex values stay unfused (the generated source has no
// complex arithmetic).
void fuse(Record& rec, const std::vector<array>& inputs) {
  const size_t n = rec.nodes.size();
  auto dtype_of_ref = [&](const Ref& r) {
    switch (r.kind) {
      case Ref::input:
        return inputs[r.index].dtype();
      case Ref::constant:
        return rec.constants[r.index].dtype();
      default:
        return rec.nodes[r.index].dtypes[r.position];
    }
  };
  std::vector<uint32_t> reads(n, 0);
  for (const auto& node : rec.nodes) {
    for (const auto& r : node.inputs) {
      if (r.kind == Ref::node) ++reads[r.index];
    }
  }
  std::vector<bool> is_output(n, false);
  for (const auto& r : rec.outputs) {
    if (r.kind == Ref::node) is_output[r.index] = true;
  }
  std::vector<std::optional<FusedOp>> ops(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& node = rec.nodes[i];
    if (node.multi) continue;
    ops[i] = fused_op_of(*node.primitive);
    if (ops[i] && node.primitive->device().type == Device::DeviceType::gpu) {
      bool complex = node.dtypes[0] == complex64;
      for (const auto& r : node.inputs) complex = complex || dtype_of_ref(r) == complex64;
      if (complex) ops[i].reset();
    }
  }

  std::vector<int> set_of(n, -1);  // the root of a node's set
  std::vector<std::vector<uint32_t>> sets;
  for (size_t root = n; root-- > 0;) {
    if (set_of[root] >= 0 || !ops[root] || Compiled::renames(*ops[root])) continue;
    const auto& top = rec.nodes[root];
    std::vector<uint32_t> members{static_cast<uint32_t>(root)};
    std::unordered_map<uint32_t, uint32_t> reads_inside;
    set_of[root] = static_cast<int>(root);
    for (size_t m = 0; m < members.size(); ++m) {
      const auto& node = rec.nodes[members[m]];
      if (*ops[members[m]] == FusedOp::Broadcast) continue;  // its input stays outside
      for (const auto& r : node.inputs) {
        if (r.kind != Ref::node) continue;
        const uint32_t c = r.index;
        const auto& cand = rec.nodes[c];
        if (set_of[c] >= 0 || !ops[c] || cand.shapes[0] != top.shapes[0] ||
            !(cand.primitive->stream() == top.primitive->stream()) ||
            (is_output[c] && Compiled::renames(*ops[c]))) {
          continue;
        }
        if (++reads_inside[c] == reads[c]) {
          set_of[c] = static_cast<int>(root);
          members.push_back(c);
        }
      }
    }
    size_t computing = 0;
    for (uint32_t m : members) computing += !Compiled::renames(*ops[m]);
    if (computing < 2) {
      for (uint32_t m : members) set_of[m] = -1;
      continue;
    }
    std::sort(members.begin(), members.end());
    sets.push_back(std::move(members));
  }
  if (sets.empty()) return;

  // Sibling sets: a set whose inputs from other nodes all come before an
  // earlier set's root, and that has its shape and stream, joins that set's
  // group, computed at the earlier root's place, up to kMaxGroupOperands
  // inputs and outputs. One kernel then computes both, reading shared inputs
  // once (the updates of an optimizer's parameters of one shape; Lion's
  // moment and parameter; the two derivatives of a gated unit).
  std::sort(sets.begin(), sets.end(),
            [](const auto& a, const auto& b) { return a.back() < b.back(); });
  struct Group {
    uint32_t at;                   // the earliest root: where the node goes
    std::vector<uint32_t> roots;   // of its sets, in order
    std::vector<uint32_t> members;
    std::vector<Ref> reads;        // the values its members read from outside
  };
  std::vector<Group> groups;
  std::vector<int> group_of(n, -1);
  auto outside_reads = [&](const std::vector<uint32_t>& members) {
    std::vector<Ref> refs;
    for (uint32_t m : members) {
      for (const auto& r : rec.nodes[m].inputs) {
        if (r.kind == Ref::node && set_of[r.index] == set_of[m]) continue;
        if (std::find(refs.begin(), refs.end(), r) == refs.end()) refs.push_back(r);
      }
    }
    return refs;
  };
  constexpr size_t kMaxGroupOperands = 24;  // inputs and outputs of one kernel
  for (auto& set : sets) {
    const uint32_t root = set.back();
    std::vector<Ref> reads = outside_reads(set);
    int joined = -1;
    for (size_t g = 0; g < groups.size() && joined < 0; ++g) {
      Group& group = groups[g];
      const auto& first = rec.nodes[group.at];
      if (first.shapes[0] != rec.nodes[root].shapes[0] ||
          !(first.primitive->stream() == rec.nodes[root].primitive->stream())) {
        continue;
      }
      bool before = true;
      for (const auto& r : reads) before = before && (r.kind != Ref::node || r.index < group.at);
      size_t operands = group.reads.size() + group.roots.size() + 1;
      for (const auto& r : reads) {
        operands += std::find(group.reads.begin(), group.reads.end(), r) == group.reads.end();
      }
      if (!before || operands > kMaxGroupOperands) continue;
      group.roots.push_back(root);
      group.members.insert(group.members.end(), set.begin(), set.end());
      for (const auto& r : reads) {
        if (std::find(group.reads.begin(), group.reads.end(), r) == group.reads.end()) {
          group.reads.push_back(r);
        }
      }
      joined = static_cast<int>(g);
    }
    if (joined < 0) {
      groups.push_back(Group{root, {root}, set, reads});
      joined = static_cast<int>(groups.size() - 1);
    }
    for (uint32_t m : set) group_of[m] = joined;
  }

  // The record again, with each group's Compiled node at its place.
  std::vector<int> group_at(n, -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    std::sort(groups[g].members.begin(), groups[g].members.end());
    group_at[groups[g].at] = static_cast<int>(g);
  }
  std::vector<uint32_t> new_index(n, UINT32_MAX);
  // A member read outside its group (a root, or an output of the function):
  // its position among the Compiled node's outputs.
  std::vector<uint32_t> new_position(n, 0);
  std::vector<RecordedNode> nodes;
  auto remap = [&](Ref r) {
    if (r.kind == Ref::node) {
      r.position = group_of[r.index] >= 0 ? new_position[r.index] : r.position;
      r.index = new_index[r.index];
    }
    return r;
  };
  for (uint32_t i = 0; i < n; ++i) {
    if (group_of[i] >= 0 && group_at[i] < 0) continue;
    if (group_of[i] < 0) {
      RecordedNode node = std::move(rec.nodes[i]);
      for (auto& r : node.inputs) r = remap(r);
      new_index[i] = static_cast<uint32_t>(nodes.size());
      nodes.push_back(std::move(node));
      continue;
    }
    const Group& group = groups[group_at[i]];
    const auto& members = group.members;
    std::unordered_map<uint32_t, uint32_t> step_of;
    for (size_t k = 0; k < members.size(); ++k) step_of.emplace(members[k], static_cast<uint32_t>(k));
    RecordedNode node;
    std::vector<Ref> outside;
    auto operand = [&](const Ref& r) -> uint32_t {
      if (r.kind == Ref::node && step_of.count(r.index)) return UINT32_MAX - step_of[r.index];
      for (size_t k = 0; k < outside.size(); ++k) {
        if (outside[k] == r) return static_cast<uint32_t>(k);
      }
      outside.push_back(r);
      return static_cast<uint32_t>(outside.size() - 1);
    };
    FusedProgram program;
    for (uint32_t m : members) {
      const auto& member = rec.nodes[m];
      FusedStep step{*ops[m], {}, member.dtypes[0], member.primitive,
                     fused_params(*ops[m], *member.primitive, member.dtypes[0])};
      for (const auto& r : member.inputs) step.args.push_back(operand(r));
      program.steps.push_back(std::move(step));
    }
    program.num_inputs = static_cast<uint32_t>(outside.size());
    for (auto& step : program.steps) {
      for (auto& a : step.args) {
        if (a >= UINT32_MAX - members.size()) a = program.num_inputs + (UINT32_MAX - a);
      }
    }
    program.shape = rec.nodes[i].shapes[0];
    // The roots first (the last step is the last root: an output, as the
    // interpreter wants), then the members that are outputs of the function.
    const uint32_t new_i = static_cast<uint32_t>(nodes.size());
    auto add_output = [&](uint32_t m) {
      new_index[m] = new_i;
      new_position[m] = static_cast<uint32_t>(program.outputs.size());
      program.outputs.push_back(program.num_inputs + step_of[m]);
      node.shapes.push_back(rec.nodes[m].shapes[0]);
      node.dtypes.push_back(rec.nodes[m].dtypes[0]);
    };
    for (uint32_t root : group.roots) add_output(root);
    for (uint32_t m : members) {
      if (is_output[m] && new_index[m] != new_i) add_output(m);
    }
    node.multi = program.outputs.size() > 1;
    node.primitive = std::make_shared<Compiled>(rec.nodes[i].primitive->stream(), std::move(program));
    for (const auto& r : outside) node.inputs.push_back(remap(r));
    nodes.push_back(std::move(node));
  }
  for (auto& r : rec.outputs) r = remap(r);
  rec.nodes = std::move(nodes);
}

std::vector<array> replay(const Record& rec, const std::vector<array>& inputs) {
  std::vector<std::vector<array>> values(rec.nodes.size());
  auto value = [&](const Ref& r) -> const array& {
    return detail::resolve(r, inputs, rec.constants, values);
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
  std::map<std::pair<std::vector<int64_t>, CompileMode>, std::shared_ptr<const Record>> records;
};

}  // namespace

VecFn compile(VecFn fun, bool /*shapeless: traced again per shape, Note [compile]*/) {
  auto cache = std::make_shared<Cache>();
  return [fun = std::move(fun), cache](const std::vector<array>& inputs) {
    CompileMode mode = g_mode.load(std::memory_order_relaxed);
    if (mode == CompileMode::disabled || t_compile_traces > 0) return fun(inputs);
    const bool simplify = mode != CompileMode::no_simplify;
    auto key = std::make_pair(signature(inputs), mode);
    std::shared_ptr<const Record> rec;
    {
      std::lock_guard l(cache->mutex);
      auto it = cache->records.find(key);
      if (it != cache->records.end()) rec = it->second;
    }
    if (!rec) {
      Record traced = trace(fun, inputs, simplify);
      if (mode == CompileMode::enabled) fuse(traced, inputs);
      rec = std::make_shared<const Record>(std::move(traced));
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

std::vector<std::string> detail::graph_primitives(const std::vector<array>& outputs) {
  std::vector<std::string> names;
  for (const array& a :
       graph_nodes(outputs, [](const array& a) { return !a.has_primitive(); })) {
    std::ostringstream os;
    a.primitive().print(os);
    names.push_back(os.str());
  }
  return names;
}

}  // namespace tessera
