// export_function, import_function, exporter and export_to_dot: Note
// [Exported functions] in io/export.h; the primitives' codecs in
// io/export_primitives.cpp.
#include "tessera/io/export.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "tessera/core/eval.h"
#include "tessera/core/primitive.h"
#include "tessera/io/bytes.h"
#include "tessera/io/export_primitives.h"
#include "tessera/io/file.h"
#include "tessera/ops/primitives/compiled.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"
#include "tessera/transforms/graph_ref.h"
#include "tessera/transforms/tape.h"

namespace tessera {

namespace {

using io::detail::find_codec;
using io::detail::NodeBuild;
using io::detail::Operands;
using io::detail::PrimitiveCodec;

using Ref = detail::GraphRef;

struct Node {
  std::string name;  // Primitive::name()
  std::vector<ExportValue> params;
  std::vector<Ref> inputs;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  const PrimitiveCodec* codec = nullptr;
};

// One trace: the signature it was made for, and its graph.
struct Trace {
  bool shapeless = false;
  uint32_t positional = 0;
  std::vector<std::string> keywords;  // sorted
  std::vector<Shape> input_shapes;    // the positional inputs, then the keyword ones
  std::vector<Dtype> input_dtypes;
  std::vector<array> constants;  // evaluated
  std::vector<Node> nodes;       // inputs before users
  std::vector<Ref> outputs;
  // Found when the trace is read (see run()).
  std::vector<size_t> used_outputs;  // per node: 1 + the highest output position read
  std::vector<bool> deferred;        // per node: a Broadcast inferred from its users
};

// The shape and dtype that the trace saw at r.
std::pair<const Shape*, Dtype> traced_type(const Trace& t, const Ref& r) {
  switch (r.kind) {
    case Ref::input:
      return {&t.input_shapes[r.index], t.input_dtypes[r.index]};
    case Ref::constant:
      return {&t.constants[r.index].shape(), t.constants[r.index].dtype()};
    default:
      return {&t.nodes[r.index].shapes[r.position], t.nodes[r.index].dtypes[r.position]};
  }
}
const Shape& traced_shape(const Trace& t, const Ref& r) { return *traced_type(t, r).first; }

// "A", "B", ..., "Z", "AA", ... for n = 1, 2, ...
std::string letters(size_t n) {
  std::string s;
  for (; n > 0; n = (n - 1) / 26) s.push_back(static_cast<char>('A' + (n - 1) % 26));
  std::reverse(s.begin(), s.end());
  return s;
}

// ---- tracing ----------------------------------------------------------------

// The inputs in trace order: positional, then keyword in sorted order.
std::vector<array> ordered_inputs(const Args& args, const Kwargs& kwargs,
                                  std::vector<std::string>& keywords) {
  keywords.clear();
  for (const auto& kv : kwargs) keywords.push_back(kv.first);
  std::sort(keywords.begin(), keywords.end());
  std::vector<array> inputs = args;
  for (const auto& k : keywords) inputs.push_back(kwargs.at(k));
  return inputs;
}

// The unevaluated nodes between outputs and the cut arrays (excluded), one
// array per node, inputs before users. Evaluated arrays are where it stops:
// they are the constants.
std::vector<array> graph_of(const std::vector<array>& outputs,
                            const std::unordered_set<std::uintptr_t>& cut) {
  return detail::graph_nodes(outputs, [&](const array& a) {
    return cut.count(a.id()) > 0 || !a.has_primitive() || a.is_available();
  });
}

// Runs fun on placeholders and records its graph (Note [Exported functions]).
// `pool` collects the constants of every trace of one file, so that a
// constant several traces read is written once; each trace's constants are
// indices into it.
Trace trace(const ExportFn& fun, const Args& args, const Kwargs& kwargs, bool shapeless,
            std::vector<array>& pool, std::vector<uint32_t>& constant_ids) {
  Trace t;
  t.shapeless = shapeless;
  t.positional = static_cast<uint32_t>(args.size());
  std::vector<array> inputs = ordered_inputs(args, kwargs, t.keywords);

  Args positional;
  Kwargs keyword;
  std::unordered_set<std::uintptr_t> cut;
  detail::GraphRefs refs(t.constants);
  for (size_t i = 0; i < inputs.size(); ++i) {
    array p = detail::placeholder(inputs[i].shape(), inputs[i].dtype(), "export_function");
    t.input_shapes.push_back(p.shape());
    t.input_dtypes.push_back(p.dtype());
    cut.insert(p.id());
    refs.set(p, Ref{Ref::input, static_cast<uint32_t>(i), 0});
    if (i < args.size()) {
      positional.push_back(p);
    } else {
      keyword.emplace(t.keywords[i - args.size()], p);
    }
  }

  std::function<void(const array&)> record = [&](const array& a) {
    Primitive& p = a.primitive();
    const std::string name = p.name();
    std::vector<array> outs = a.outputs();
    if (name == "CustomTransforms") {
      // custom_function: output k takes the buffer of the function's output
      // k, the k-th of the node's last outs.size() inputs (Note [Custom
      // transforms] in transforms/transforms.cpp).
      const auto& ins = a.inputs();
      for (size_t k = 0; k < outs.size(); ++k) {
        refs.set(outs[k], refs.of(ins[ins.size() - outs.size() + k]));
      }
      return;
    }
    if (const auto* compiled = dynamic_cast<const Compiled*>(&p)) {
      // The program as the primitives it fused (Note [Fused programs]).
      std::vector<array> unfused = compiled->unfused(a.inputs());
      std::unordered_set<std::uintptr_t> inner;
      for (const auto& in : a.inputs()) inner.insert(in.id());
      for (const array& n : graph_of(unfused, inner)) record(n);
      for (size_t k = 0; k < outs.size(); ++k) refs.set(outs[k], refs.of(unfused[k]));
      return;
    }
    const PrimitiveCodec* codec = find_codec(name);
    if (!codec) {
      throw std::invalid_argument("[export_function] the primitive " + name +
                                  " cannot be exported: Tessera cannot make it again from a file");
    }
    Node node;
    node.name = name;
    node.params = codec->parameters(p);
    for (const auto& in : a.inputs()) node.inputs.push_back(refs.of(in));
    for (const auto& o : outs) {
      node.shapes.push_back(o.shape());
      node.dtypes.push_back(o.dtype());
    }
    const auto index = static_cast<uint32_t>(t.nodes.size());
    t.nodes.push_back(std::move(node));
    for (size_t k = 0; k < outs.size(); ++k) {
      refs.set(outs[k], Ref{Ref::node, index, static_cast<uint32_t>(k)});
    }
  };

  {
    array::TracingScope tracing;
    std::vector<array> outputs = fun(positional, keyword);
    for (const array& a : graph_of(outputs, cut)) record(a);
    for (const auto& o : outputs) t.outputs.push_back(refs.of(o));
  }

  // The constants are evaluated now that the trace is over: their values are
  // frozen at the export.
  for (auto& c : t.constants) c = io::detail::host_data(c);
  std::unordered_map<std::uintptr_t, uint32_t> in_pool;
  for (size_t i = 0; i < pool.size(); ++i) in_pool.emplace(pool[i].id(), static_cast<uint32_t>(i));
  constant_ids.clear();
  for (const auto& c : t.constants) {
    auto [it, added] = in_pool.emplace(c.id(), static_cast<uint32_t>(pool.size()));
    if (added) pool.push_back(c);
    constant_ids.push_back(it->second);
  }
  return t;
}

// ---- the file ---------------------------------------------------------------

// Note [The export file]
// Tessera's own format (not MLX's .mlxfn), little-endian:
//   magic "TESSERA-FUNCTION" (16 bytes), u32 format version (kVersion),
//   metadata (string), then records, each opened by a u8 tag:
//   'T' a trace:
//       u8 shapeless, u32 positional inputs, u32 keywords + their names (sorted),
//       each input's type;
//       u32 constants, each a u32 index into the file's pool of constants: the
//         next one (the pool's size) is a new constant, its type and then its
//         bytes (row-major) from the next multiple of 64 bytes of the file, so
//         that a mapped file's arrays are used in place;
//       u32 nodes, each: name (string), parameters (a list value), u32 inputs
//         as refs, u32 outputs as types;
//       u32 outputs as refs.
//   'E' the end: nothing follows; a file without it is truncated (an
//       exporter writes it in close()).
//   string: u64 length and bytes; type: u8 dtype, u32 ndim, i32 dims;
//   ref: u8 kind (input, constant, node), u32 index, u32 position;
//   value: u8 tag (0 none, 1 bool, 2 int64, 3 float64, 4 dtype, 5 string,
//     6 list: u32 count and values), then the payload.
// A reader refuses a newer version by name; a new field raises kVersion.
constexpr char kMagic[16] = {'T', 'E', 'S', 'S', 'E', 'R', 'A', '-',
                             'F', 'U', 'N', 'C', 'T', 'I', 'O', 'N'};
constexpr uint32_t kVersion = 1;
constexpr size_t kAlignment = 64;
enum ValueTag : uint8_t { none_tag, bool_tag, int_tag, float_tag, dtype_tag, string_tag, list_tag };

// Writes a file in pieces: small fields are gathered, array bytes written as
// they lie in memory.
class Out {
 public:
  explicit Out(io::Writer& w) : w_(w) {}

  template <typename T>
  void put(T v) {
    io::detail::put_le(buf_, v);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    buf_ += s;
  }
  void type(const Shape& shape, Dtype t) {
    put<uint8_t>(static_cast<uint8_t>(t.val));
    put<uint32_t>(static_cast<uint32_t>(shape.size()));
    for (auto d : shape) put<int32_t>(d);
  }
  void ref(const Ref& r) {
    put<uint8_t>(r.kind);
    put<uint32_t>(r.index);
    put<uint32_t>(r.position);
  }
  void value(const ExportValue& v) {
    std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::monostate>) {
            put<uint8_t>(none_tag);
          } else if constexpr (std::is_same_v<X, bool>) {
            put<uint8_t>(bool_tag);
            put<uint8_t>(x);
          } else if constexpr (std::is_same_v<X, int64_t>) {
            put<uint8_t>(int_tag);
            put<int64_t>(x);
          } else if constexpr (std::is_same_v<X, double>) {
            put<uint8_t>(float_tag);
            put<double>(x);
          } else if constexpr (std::is_same_v<X, Dtype>) {
            put<uint8_t>(dtype_tag);
            put<uint8_t>(static_cast<uint8_t>(x.val));
          } else if constexpr (std::is_same_v<X, std::string>) {
            put<uint8_t>(string_tag);
            str(x);
          } else {
            put<uint8_t>(list_tag);
            put<uint32_t>(static_cast<uint32_t>(x.size()));
            for (const auto& e : x) value(e);
          }
        },
        v.value);
  }
  // The bytes of an evaluated row-contiguous array, from the next multiple of
  // kAlignment.
  void data(const array& a) {
    buf_.append((kAlignment - pos() % kAlignment) % kAlignment, '\0');
    flush();
    if (a.nbytes()) w_.write(io::detail::bytes_of(a), a.nbytes());
    written_ += a.nbytes();
  }
  void flush() {
    if (!buf_.empty()) w_.write(buf_.data(), buf_.size());
    written_ += buf_.size();
    buf_.clear();
  }

 private:
  size_t pos() const { return written_ + buf_.size(); }
  io::Writer& w_;
  std::string buf_;
  size_t written_ = 0;
};

void write_header(Out& out, const std::string& metadata) {
  for (char c : kMagic) out.put<char>(c);
  out.put<uint32_t>(kVersion);
  out.str(metadata);
  out.flush();
}

// `pool_size` constants were written before this trace.
void write_trace(Out& out, const Trace& t, const std::vector<uint32_t>& constant_ids,
                 size_t pool_size) {
  out.put<uint8_t>('T');
  out.put<uint8_t>(t.shapeless);
  out.put<uint32_t>(t.positional);
  out.put<uint32_t>(static_cast<uint32_t>(t.keywords.size()));
  for (const auto& k : t.keywords) out.str(k);
  for (size_t i = 0; i < t.input_shapes.size(); ++i) out.type(t.input_shapes[i], t.input_dtypes[i]);
  out.put<uint32_t>(static_cast<uint32_t>(t.constants.size()));
  for (size_t i = 0; i < t.constants.size(); ++i) {
    out.put<uint32_t>(constant_ids[i]);
    if (constant_ids[i] < pool_size) continue;  // written by an earlier trace
    const array& c = t.constants[i];
    out.type(c.shape(), c.dtype());
    out.data(c);
    ++pool_size;
  }
  out.put<uint32_t>(static_cast<uint32_t>(t.nodes.size()));
  for (const auto& n : t.nodes) {
    out.str(n.name);
    out.value(ExportValue{n.params});
    out.put<uint32_t>(static_cast<uint32_t>(n.inputs.size()));
    for (const auto& r : n.inputs) out.ref(r);
    out.put<uint32_t>(static_cast<uint32_t>(n.shapes.size()));
    for (size_t k = 0; k < n.shapes.size(); ++k) out.type(n.shapes[k], n.dtypes[k]);
  }
  out.put<uint32_t>(static_cast<uint32_t>(t.outputs.size()));
  for (const auto& r : t.outputs) out.ref(r);
  out.flush();
}

// Reads a file's fields in order; a field past the end raises
// std::runtime_error naming it.
class In {
 public:
  explicit In(const io::detail::Bytes& b) : b_(b) {}
  size_t pos() const { return pos_; }
  size_t left() const { return b_.size - pos_; }

  void need(size_t n, const std::string& what) const {
    if (n > left()) {
      throw std::runtime_error("[import_function] file '" + b_.label + "' is truncated: " + what +
                               " needs " + std::to_string(n) + " bytes at byte " +
                               std::to_string(pos_) + ", the file has " + std::to_string(b_.size));
    }
  }
  [[noreturn]] void corrupt(const std::string& what) const {
    throw std::runtime_error("[import_function] file '" + b_.label + "' is corrupt: " + what +
                             " (at byte " + std::to_string(pos_) + ")");
  }
  void skip(size_t n, const std::string& what) {
    need(n, what);
    pos_ += n;
  }
  template <typename T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v = io::detail::read_le<T>(b_.data + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const std::string& what) {
    auto n = get<uint64_t>(what);
    need(n, what);
    std::string s(b_.data + pos_, n);
    pos_ += n;
    return s;
  }
  // A count of items of at least `size` bytes each, which must fit in the rest.
  uint32_t count(size_t size, const std::string& what) {
    auto n = get<uint32_t>(what);
    need(static_cast<size_t>(n) * size, what);
    return n;
  }
  Dtype dtype(const std::string& what) {
    auto v = get<uint8_t>(what);
    if (v >= Dtype::num_types) corrupt(what + " has no dtype " + std::to_string(v));
    return all_dtypes[v];
  }
  std::pair<Shape, Dtype> type(const std::string& what) {
    Dtype t = dtype(what);
    uint32_t ndim = count(4, what);
    Shape shape(ndim);
    for (auto& d : shape) {
      d = get<int32_t>(what);
      if (d < 0) corrupt(what + " has a negative dimension");
    }
    return {std::move(shape), t};
  }
  ExportValue value(const std::string& what, int depth = 0) {
    if (depth > 16) corrupt(what + " nests too deep");
    ExportValue v;
    switch (get<uint8_t>(what)) {
      case none_tag:
        break;
      case bool_tag:
        v.value = get<uint8_t>(what) != 0;
        break;
      case int_tag:
        v.value = get<int64_t>(what);
        break;
      case float_tag:
        v.value = get<double>(what);
        break;
      case dtype_tag:
        v.value = dtype(what);
        break;
      case string_tag:
        v.value = str(what);
        break;
      case list_tag: {
        uint32_t n = count(1, what);
        std::vector<ExportValue> list;
        list.reserve(n);
        for (uint32_t i = 0; i < n; ++i) list.push_back(value(what, depth + 1));
        v.value = std::move(list);
        break;
      }
      default:
        corrupt(what + " has an unknown kind of value");
    }
    return v;
  }
  array data(const Shape& shape, Dtype t, const std::string& what) {
    size_t n = t.size;
    for (auto d : shape) {
      if (__builtin_mul_overflow(n, static_cast<size_t>(d), &n)) corrupt(what + " is too large");
    }
    pos_ += std::min((kAlignment - pos_ % kAlignment) % kAlignment, left());
    need(n, what);
    array a = io::detail::array_at(b_, pos_, shape, t);
    pos_ += n;
    return a;
  }

 private:
  const io::detail::Bytes& b_;
  size_t pos_ = 0;
};

Ref read_ref(In& in, const Trace& t, size_t num_nodes, const std::string& what) {
  Ref r{static_cast<Ref::Kind>(in.get<uint8_t>(what)), in.get<uint32_t>(what),
        in.get<uint32_t>(what)};
  bool valid = false;
  switch (r.kind) {
    case Ref::input:
      valid = r.index < t.input_shapes.size() && r.position == 0;
      break;
    case Ref::constant:
      valid = r.index < t.constants.size() && r.position == 0;
      break;
    case Ref::node:
      valid = r.index < num_nodes && r.position < t.nodes[r.index].shapes.size();
      break;
  }
  if (!valid) in.corrupt(what + " refers to an array that does not exist");
  return r;
}

void find_deferred_broadcasts(Trace& t);

Trace read_trace(In& in, std::vector<array>& pool) {
  Trace t;
  t.shapeless = in.get<uint8_t>("the trace's flags") != 0;
  t.positional = in.get<uint32_t>("the positional inputs");
  uint32_t num_keywords = in.count(8, "the keyword inputs");
  for (uint32_t i = 0; i < num_keywords; ++i) t.keywords.push_back(in.str("a keyword"));
  for (uint64_t i = 0; i < uint64_t{t.positional} + num_keywords; ++i) {
    auto [shape, dtype] = in.type("the type of input " + std::to_string(i));
    t.input_shapes.push_back(std::move(shape));
    t.input_dtypes.push_back(dtype);
  }
  uint32_t num_constants = in.count(4, "the constants");
  for (uint32_t i = 0; i < num_constants; ++i) {
    const std::string what = "constant " + std::to_string(i);
    auto id = in.get<uint32_t>(what);
    if (id > pool.size()) in.corrupt(what + " refers to a constant that does not exist");
    if (id == pool.size()) {
      auto [shape, dtype] = in.type(what);
      pool.push_back(in.data(shape, dtype, what));
    }
    t.constants.push_back(pool[id]);
  }
  uint32_t num_nodes = in.count(1, "the nodes");
  for (uint32_t i = 0; i < num_nodes; ++i) {
    const std::string what = "node " + std::to_string(i);
    Node n;
    n.name = in.str(what);
    n.codec = find_codec(n.name);
    if (!n.codec) {
      in.corrupt(what + " is a " + n.name + ", a primitive that this build of Tessera cannot make");
    }
    ExportValue params = in.value(what);
    auto* list = std::get_if<std::vector<ExportValue>>(&params.value);
    if (!list) in.corrupt(what + " has no list of parameters");
    n.params = std::move(*list);
    uint32_t num_inputs = in.count(9, what);
    for (uint32_t k = 0; k < num_inputs; ++k) n.inputs.push_back(read_ref(in, t, i, what));
    uint32_t num_outputs = in.count(5, what);
    if (num_outputs == 0) in.corrupt(what + " has no outputs");
    for (uint32_t k = 0; k < num_outputs; ++k) {
      auto [shape, dtype] = in.type(what);
      n.shapes.push_back(std::move(shape));
      n.dtypes.push_back(dtype);
    }
    t.nodes.push_back(std::move(n));
  }
  uint32_t num_outputs = in.count(9, "the outputs");
  for (uint32_t k = 0; k < num_outputs; ++k) {
    t.outputs.push_back(read_ref(in, t, t.nodes.size(), "the outputs"));
  }

  t.used_outputs.assign(t.nodes.size(), 1);
  auto use = [&](const Ref& r) {
    if (r.kind == Ref::node) {
      t.used_outputs[r.index] = std::max<size_t>(t.used_outputs[r.index], r.position + 1);
    }
  };
  for (const auto& n : t.nodes) std::for_each(n.inputs.begin(), n.inputs.end(), use);
  std::for_each(t.outputs.begin(), t.outputs.end(), use);
  if (t.shapeless) find_deferred_broadcasts(t);
  return t;
}

// ---- running a trace ----------------------------------------------------------

// Note [Shapeless imports]
// A shapeless trace runs on inputs of other shapes: each node whose inputs'
// shapes differ from the trace's takes output shapes from its codec's rule
// (Note [Exported primitives]). Broadcasts need more: the op functions
// broadcast operands (a bias, a scalar, a weight's batch axes) to the shape
// of the other operands, and the trace holds that shape as a constant of a
// Broadcast node. A Broadcast is deferred when every user is elementwise or a
// matmul and the trace's target is what broadcasting the users' operands
// (Broadcasts read unbroadcast) gives: such a target follows the other
// operands. When its input changes, a deferred Broadcast passes the input on
// unbroadcast, and its user broadcasts its operands to the shape they now
// make (broadcast_to). Other Broadcasts (broadcast_to of a fixed shape) keep
// their target. Shapes that cannot be inferred raise std::invalid_argument.

// The shapes that a user of `kind` broadcasts its operands to; throws
// std::invalid_argument when they do not broadcast.
std::vector<Shape> operand_targets(Operands kind, const std::vector<Shape>& shapes,
                                   const std::string& name) {
  if (kind == Operands::elementwise) {
    return std::vector<Shape>(shapes.size(), broadcast_shapes(shapes, name.c_str()));
  }
  const Shape &a = shapes.at(0), &b = shapes.at(1);
  if (a.size() < 2 || b.size() < 2) throw std::invalid_argument("[" + name + "] not a matrix");
  Shape batch =
      broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), name.c_str());
  std::vector<Shape> targets(shapes.size(), batch);
  targets[0].insert(targets[0].end(), a.end() - 2, a.end());
  targets[1].insert(targets[1].end(), b.end() - 2, b.end());
  for (size_t k = 2; k < targets.size(); ++k)
    targets[k].insert(targets[k].end(), {a[a.size() - 2], b.back()});
  return targets;
}

bool is_broadcast(const Node& n) { return n.name == "Broadcast" && n.inputs.size() == 1; }

void find_deferred_broadcasts(Trace& t) {
  const size_t n = t.nodes.size();
  t.deferred.assign(n, false);
  std::vector<std::vector<std::pair<size_t, size_t>>> users(n);  // (user, operand)
  for (size_t i = 0; i < n; ++i) {
    const auto& ins = t.nodes[i].inputs;
    for (size_t k = 0; k < ins.size(); ++k) {
      if (ins[k].kind == Ref::node) users[ins[k].index].emplace_back(i, k);
    }
  }
  std::vector<bool> is_output(n, false);
  for (const auto& r : t.outputs) {
    if (r.kind == Ref::node) is_output[r.index] = true;
  }
  auto unbroadcast = [&](const Ref& r) -> const Shape& {
    if (r.kind == Ref::node && is_broadcast(t.nodes[r.index])) {
      return traced_shape(t, t.nodes[r.index].inputs[0]);
    }
    return traced_shape(t, r);
  };
  for (size_t i = 0; i < n; ++i) {
    if (!is_broadcast(t.nodes[i]) || is_output[i] || users[i].empty()) continue;
    bool implied = true;
    for (auto [u, k] : users[i]) {
      const Node& user = t.nodes[u];
      if (user.codec->operands == Operands::fixed) {
        implied = false;
        break;
      }
      std::vector<Shape> shapes;
      for (const auto& r : user.inputs) shapes.push_back(unbroadcast(r));
      try {
        implied =
            operand_targets(user.codec->operands, shapes, user.name)[k] == t.nodes[i].shapes[0];
      } catch (const std::invalid_argument&) {
        implied = false;
      }
      if (!implied) break;
    }
    t.deferred[i] = implied;
  }
}

// The outputs of trace t on these inputs (in trace order): its nodes made
// again, lazily, on the default stream. `exact`: the inputs have the trace's
// shapes, so no shape is inferred.
std::vector<array> run(const Trace& t, const std::vector<array>& inputs, bool exact) {
  const Stream s = to_stream(std::monostate{});
  std::vector<std::vector<array>> values(t.nodes.size());
  std::vector<bool> pending(t.nodes.size(), false);  // a deferred Broadcast passing its input on
  auto value = [&](const Ref& r) -> const array& {
    return detail::resolve(r, inputs, t.constants, values);
  };
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    std::vector<array> ins;
    std::vector<Shape> traced;
    bool changed = false, any_pending = false;
    for (const auto& r : n.inputs) {
      if (r.kind == Ref::node && r.position >= values[r.index].size()) {
        throw std::runtime_error("[import_function::call] output " + std::to_string(r.position) +
                                 " of " + t.nodes[r.index].name + " is not available");
      }
      ins.push_back(value(r));
      traced.push_back(traced_shape(t, r));
      changed = changed || ins.back().shape() != traced.back();
      any_pending = any_pending || (r.kind == Ref::node && pending[r.index]);
    }
    if (!exact && t.deferred[i]) {
      pending[i] = true;
      values[i] = {ins[0]};
      continue;
    }
    if (any_pending) {
      std::vector<Shape> shapes;
      for (const auto& x : ins) shapes.push_back(x.shape());
      std::vector<Shape> targets;
      try {
        targets = operand_targets(n.codec->operands, shapes, n.name);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("[import_function::call] " + n.name +
                                    " cannot infer its output shapes: " + e.what());
      }
      for (size_t k = 0; k < ins.size(); ++k) {
        if (n.inputs[k].kind == Ref::node && pending[n.inputs[k].index]) {
          ins[k] = broadcast_to(ins[k], targets[k], s);
        }
      }
    }
    NodeBuild b{n.name.c_str(), n.params,          ins, traced, n.shapes, n.dtypes,
                changed,        t.used_outputs[i], s};
    values[i] = n.codec->build(b);
  }
  std::vector<array> outputs;
  for (const auto& r : t.outputs) {
    if (r.kind == Ref::node && pending[r.index]) {
      throw std::logic_error("[import_function::call] a deferred broadcast is an output (bug)");
    }
    outputs.push_back(value(r));
  }
  return outputs;
}

// Whether the inputs match t's signature: exactly, or (shapeless) up to the
// sizes of their dimensions.
bool matches(const Trace& t, const Args& args, const Kwargs& kwargs, bool exact) {
  if (args.size() != t.positional || kwargs.size() != t.keywords.size()) return false;
  for (const auto& k : t.keywords) {
    if (!kwargs.count(k)) return false;
  }
  for (size_t i = 0; i < t.input_shapes.size(); ++i) {
    const array& x = i < args.size() ? args[i] : kwargs.at(t.keywords[i - args.size()]);
    if (x.dtype() != t.input_dtypes[i]) return false;
    if (exact ? x.shape() != t.input_shapes[i] : x.ndim() != t.input_shapes[i].size()) return false;
  }
  return true;
}

std::string describe(const Shape& shape, Dtype t) { return shape_str(shape) + " " + dtype_name(t); }

[[noreturn]] void no_match(const std::vector<Trace>& traces, const Args& args,
                           const Kwargs& kwargs) {
  std::ostringstream os;
  os << "[import_function::call] No imported function found which matches the given positional "
        "and keyword arguments. Possible functions include:";
  for (size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = traces[i];
    os << "\n " << i + 1 << ". Function with " << t.positional << " positional inputs and "
       << t.keywords.size() << " keyword inputs" << (t.shapeless ? " (shapeless)" : "") << ":";
    for (size_t k = 0; k < t.input_shapes.size(); ++k) {
      os << "\n   "
         << (k < t.positional ? std::to_string(k + 1) : '"' + t.keywords[k - t.positional] + '"')
         << ": " << describe(t.input_shapes[k], t.input_dtypes[k]);
    }
  }
  std::vector<std::string> keywords;
  std::vector<array> inputs = ordered_inputs(args, kwargs, keywords);
  os << "\n\nCalled with " << args.size() << " positional inputs and " << kwargs.size()
     << " keyword inputs:";
  for (size_t k = 0; k < inputs.size(); ++k) {
    os << "\n  "
       << (k < args.size() ? std::to_string(k + 1) : '"' + keywords[k - args.size()] + '"') << ": "
       << describe(inputs[k].shape(), inputs[k].dtype());
  }
  throw std::invalid_argument(os.str());
}

// ---- the callback -------------------------------------------------------------

void send_to(const ExportCallback& callback, const Trace& t) {
  using Typed = std::vector<std::tuple<std::string, Shape, Dtype>>;
  // Names: the inputs, the outputs, the constants, then the nodes' outputs.
  std::vector<std::string> input_names, constant_names;
  std::vector<std::vector<std::string>> node_names(t.nodes.size());
  size_t named = 0;
  auto fresh = [&] { return letters(++named); };
  for (size_t i = 0; i < t.input_shapes.size(); ++i) input_names.push_back(fresh());
  for (const auto& r : t.outputs) {
    if (r.kind == Ref::node) {
      auto& names = node_names[r.index];
      names.resize(t.nodes[r.index].shapes.size());
      if (names[r.position].empty()) names[r.position] = fresh();
    }
  }
  for (size_t i = 0; i < t.constants.size(); ++i) constant_names.push_back(fresh());
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    node_names[i].resize(t.nodes[i].shapes.size());
    for (auto& name : node_names[i]) {
      if (name.empty()) name = fresh();
    }
  }
  auto name_of = [&](const Ref& r) -> const std::string& {
    return detail::resolve(r, input_names, constant_names, node_names);
  };
  auto typed = [&](const std::vector<Ref>& refs) {
    Typed out;
    for (const auto& r : refs) {
      auto [shape, dtype] = traced_type(t, r);
      out.emplace_back(name_of(r), *shape, dtype);
    }
    return out;
  };

  Typed inputs;
  for (size_t i = 0; i < t.input_shapes.size(); ++i) {
    inputs.emplace_back(input_names[i], t.input_shapes[i], t.input_dtypes[i]);
  }
  callback({{"type", std::string("inputs")}, {"inputs", std::move(inputs)}});
  std::vector<std::pair<std::string, std::string>> keywords;
  for (size_t k = 0; k < t.keywords.size(); ++k) {
    keywords.emplace_back(t.keywords[k], input_names[t.positional + k]);
  }
  callback({{"type", std::string("keyword_inputs")}, {"keywords", std::move(keywords)}});
  callback({{"type", std::string("outputs")}, {"outputs", typed(t.outputs)}});
  std::vector<std::pair<std::string, array>> constants;
  for (size_t i = 0; i < t.constants.size(); ++i)
    constants.emplace_back(constant_names[i], t.constants[i]);
  callback({{"type", std::string("constants")}, {"constants", std::move(constants)}});
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    Typed outputs;
    for (size_t k = 0; k < n.shapes.size(); ++k)
      outputs.emplace_back(node_names[i][k], n.shapes[k], n.dtypes[k]);
    callback({{"type", std::string("primitive")},
              {"name", n.name},
              {"arguments", n.params},
              {"inputs", typed(n.inputs)},
              {"outputs", std::move(outputs)}});
  }
}

// A file error of the I/O layer under the name of the export op.
[[noreturn]] void rethrow_as(const std::runtime_error& e, const char* op) {
  std::string what = e.what();
  if (what.rfind('[', 0) == 0) what = what.substr(what.find(']') + 2);
  throw std::runtime_error(std::string("[") + op + "] " + what);
}

}  // namespace

// ---- FunctionExporter -----------------------------------------------------------

struct FunctionExporter::State {
  ExportFn fun;
  bool shapeless;
  ExportCallback callback;               // or a file:
  std::unique_ptr<io::FileWriter> file;  // complete once closed
  std::unique_ptr<Out> out;
  std::vector<array> pool;  // the constants written so far
  bool closed = false;

  void call(const Args& args, const Kwargs& kwargs) {
    if (closed) {
      throw std::runtime_error("[export_function] Attempting to write after exporting is closed.");
    }
    std::vector<uint32_t> ids;
    if (callback) {
      std::vector<array> own_pool;  // nothing is written: no constant to share
      send_to(callback, trace(fun, args, kwargs, shapeless, own_pool, ids));
      return;
    }
    const size_t written = pool.size();
    Trace t = trace(fun, args, kwargs, shapeless, pool, ids);
    try {
      write_trace(*out, t, ids, written);
    } catch (...) {
      abandon();  // a half-written trace: no file rather than a corrupt one
      throw;
    }
  }
  void close() {
    if (closed) return;
    closed = true;
    if (!file) return;
    try {
      out->put<uint8_t>('E');
      out->flush();
      file->finish();
    } catch (const std::runtime_error& e) {
      rethrow_as(e, "export_function");
    }
  }
  // Closes without completing the file, which is removed.
  void abandon() {
    closed = true;
    out.reset();
    file.reset();
  }
};

namespace {

// Closes an exporter whose owner goes away: a destructor cannot report a
// failure, which close() called by hand does.
void close_quietly(FunctionExporter::State* s) noexcept {
  if (!s) return;
  try {
    s->close();
  } catch (...) {
  }
}

FunctionExporter::State& state_of(const std::unique_ptr<FunctionExporter::State>& s) {
  if (!s) throw std::runtime_error("[export_function] the exporter was moved from");
  return *s;
}

}  // namespace

FunctionExporter::FunctionExporter(std::unique_ptr<State> state) : state_(std::move(state)) {}
FunctionExporter::FunctionExporter(FunctionExporter&&) noexcept = default;
FunctionExporter& FunctionExporter::operator=(FunctionExporter&& other) noexcept {
  if (this != &other) {
    close_quietly(state_.get());
    state_ = std::move(other.state_);
  }
  return *this;
}
FunctionExporter::~FunctionExporter() { close_quietly(state_.get()); }

void FunctionExporter::operator()(const Args& args) { (*this)(args, Kwargs{}); }
void FunctionExporter::operator()(const Kwargs& kwargs) { (*this)(Args{}, kwargs); }
void FunctionExporter::operator()(const Args& args, const Kwargs& kwargs) {
  state_of(state_).call(args, kwargs);
}
void FunctionExporter::close() { state_of(state_).close(); }

namespace {

ExportFn of_args(const std::function<std::vector<array>(const Args&)>& fun) {
  if (!fun) return nullptr;
  return [fun](const Args& args, const Kwargs&) { return fun(args); };
}
ExportFn of_kwargs(const std::function<std::vector<array>(const Kwargs&)>& fun) {
  if (!fun) return nullptr;
  return [fun](const Args&, const Kwargs& kwargs) { return fun(kwargs); };
}

using State = FunctionExporter::State;

std::unique_ptr<State> new_state(const ExportFn& fun, bool shapeless) {
  if (!fun) throw std::invalid_argument("[export_function] the function is empty");
  auto s = std::make_unique<State>();
  s->fun = fun;
  s->shapeless = shapeless;
  return s;
}

std::unique_ptr<State> file_state(const std::string& file, const ExportFn& fun, bool shapeless,
                                  const std::string& metadata) {
  auto s = new_state(fun, shapeless);
  try {
    s->file = std::make_unique<io::FileWriter>(file);
    s->out = std::make_unique<Out>(*s->file);
    write_header(*s->out, metadata);
  } catch (const std::runtime_error& e) {
    rethrow_as(e, "export_function");
  }
  return s;
}

std::unique_ptr<State> callback_state(const ExportCallback& callback, const ExportFn& fun,
                                      bool shapeless) {
  if (!callback) throw std::invalid_argument("[export_function] the callback is empty");
  auto s = new_state(fun, shapeless);
  s->callback = callback;
  return s;
}

// One trace, then the file complete; a failed trace leaves no file.
void export_once(std::unique_ptr<State> s, const Args& args, const Kwargs& kwargs) {
  try {
    s->call(args, kwargs);
  } catch (...) {
    s->abandon();
    throw;
  }
  s->close();
}

}  // namespace

FunctionExporter exporter(const std::string& file, const ExportFn& fun, bool shapeless,
                          const std::string& metadata) {
  return FunctionExporter(file_state(file, fun, shapeless, metadata));
}
FunctionExporter exporter(const std::string& file,
                          const std::function<std::vector<array>(const Args&)>& fun, bool shapeless,
                          const std::string& metadata) {
  return exporter(file, of_args(fun), shapeless, metadata);
}
FunctionExporter exporter(const std::string& file,
                          const std::function<std::vector<array>(const Kwargs&)>& fun,
                          bool shapeless, const std::string& metadata) {
  return exporter(file, of_kwargs(fun), shapeless, metadata);
}
FunctionExporter exporter(const ExportCallback& callback, const ExportFn& fun, bool shapeless) {
  return FunctionExporter(callback_state(callback, fun, shapeless));
}
FunctionExporter exporter(const ExportCallback& callback,
                          const std::function<std::vector<array>(const Args&)>& fun,
                          bool shapeless) {
  return exporter(callback, of_args(fun), shapeless);
}
FunctionExporter exporter(const ExportCallback& callback,
                          const std::function<std::vector<array>(const Kwargs&)>& fun,
                          bool shapeless) {
  return exporter(callback, of_kwargs(fun), shapeless);
}

void export_function(const std::string& file, const ExportFn& fun, const Args& args,
                     const Kwargs& kwargs, bool shapeless, const std::string& metadata) {
  export_once(file_state(file, fun, shapeless, metadata), args, kwargs);
}
void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Args&)>& fun, const Args& args,
                     bool shapeless, const std::string& metadata) {
  export_function(file, of_args(fun), args, Kwargs{}, shapeless, metadata);
}
void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Kwargs&)>& fun,
                     const Kwargs& kwargs, bool shapeless, const std::string& metadata) {
  export_function(file, of_kwargs(fun), Args{}, kwargs, shapeless, metadata);
}
void export_function(const ExportCallback& callback, const ExportFn& fun, const Args& args,
                     const Kwargs& kwargs, bool shapeless) {
  export_once(callback_state(callback, fun, shapeless), args, kwargs);
}
void export_function(const ExportCallback& callback,
                     const std::function<std::vector<array>(const Args&)>& fun, const Args& args,
                     bool shapeless) {
  export_function(callback, of_args(fun), args, Kwargs{}, shapeless);
}
void export_function(const ExportCallback& callback,
                     const std::function<std::vector<array>(const Kwargs&)>& fun,
                     const Kwargs& kwargs, bool shapeless) {
  export_function(callback, of_kwargs(fun), Args{}, kwargs, shapeless);
}

// ---- ImportedFunction ---------------------------------------------------------

struct ImportedFunction::Table {
  std::string file;
  std::string metadata;
  std::vector<Trace> traces;
};

ImportedFunction import_function(const std::string& file) {
  std::shared_ptr<io::FileReader> reader;
  try {
    reader = std::make_shared<io::FileReader>(file);
  } catch (const std::runtime_error& e) {
    rethrow_as(e, "import_function");
  }
  io::detail::Bytes bytes = io::detail::bytes_of(*reader, "export");
  In in(bytes);
  auto bad_magic = [&] {
    // MLX's .mlxfn files open with the length of MLX's version string ("0.32.4").
    std::string hint;
    if (bytes.size >= 9 && io::detail::read_le<uint64_t>(bytes.data) < 32 && bytes.data[8] >= '0' &&
        bytes.data[8] <= '9') {
      hint = "; it looks like an MLX export, whose format Tessera does not read";
    }
    throw std::runtime_error("[import_function] file '" + file +
                             "' is not a Tessera export (bad magic" + hint + ")");
  };
  // A file that ends within the magic is truncated; other bytes are not an export.
  if (std::memcmp(bytes.data, kMagic, std::min(bytes.size, sizeof(kMagic))) != 0 ||
      bytes.size == 0) {
    bad_magic();
  }
  in.skip(sizeof(kMagic), "the magic");
  auto version = in.get<uint32_t>("the format version");
  if (version == 0 || version > kVersion) {
    throw std::runtime_error("[import_function] file '" + file + "' has export format version " +
                             std::to_string(version) + ", and this Tessera reads versions 1 to " +
                             std::to_string(kVersion) +
                             (version > kVersion ? " (it was written by a newer Tessera)" : ""));
  }
  auto table = std::make_shared<ImportedFunction::Table>();
  table->file = file;
  table->metadata = in.str("the metadata");
  std::vector<array> pool;
  for (;;) {
    auto tag = in.get<uint8_t>("the next record (a trace or the end)");
    if (tag == 'E') break;
    if (tag != 'T') in.corrupt("a record that is neither a trace nor the end");
    table->traces.push_back(read_trace(in, pool));
  }
  if (in.left() != 0) in.corrupt(std::to_string(in.left()) + " bytes follow the end");
  // Bool constants are conversions of the file's bytes: make them once.
  eval(pool);
  return ImportedFunction(std::move(table));
}

const std::string& ImportedFunction::metadata() const { return table_->metadata; }

std::vector<array> ImportedFunction::operator()(const Args& args) const {
  return (*this)(args, Kwargs{});
}
std::vector<array> ImportedFunction::operator()(const Kwargs& kwargs) const {
  return (*this)(Args{}, kwargs);
}
std::vector<array> ImportedFunction::operator()(const Args& args, const Kwargs& kwargs) const {
  const auto& traces = table_->traces;
  const Trace* found = nullptr;
  for (const auto& t : traces) {
    if (matches(t, args, kwargs, true)) {
      found = &t;
      break;
    }
  }
  for (size_t i = 0; !found && i < traces.size(); ++i) {
    if (traces[i].shapeless && matches(traces[i], args, kwargs, false)) found = &traces[i];
  }
  if (!found) no_match(traces, args, kwargs);
  std::vector<std::string> keywords;
  return run(*found, ordered_inputs(args, kwargs, keywords), matches(*found, args, kwargs, true));
}

// ---- export_to_dot ---------------------------------------------------------------

const std::string& NodeNamer::get_name(const array& x) {
  auto it = names.find(x.id());
  if (it != names.end()) return it->second;
  return names.emplace(x.id(), letters(names.size() + 1)).first->second;
}

void NodeNamer::set_name(const array& x, std::string name) {
  names.insert_or_assign(x.id(), std::move(name));
}

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

}  // namespace

void export_to_dot(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs) {
  std::unordered_set<std::uintptr_t> sinks, sources;
  for (const auto& o : outputs) sinks.insert(o.id());
  auto source = [&](const array& a) {
    if ((!a.has_primitive() || a.is_available()) && sources.insert(a.id()).second) {
      os << "{ rank=source; " << quoted(namer.get_name(a)) << "; }\n";
    }
  };
  os << "digraph {\n";
  for (const auto& o : outputs) source(o);
  size_t next_node = 0;
  for (const array& a : graph_of(outputs, {})) {
    for (const auto& in : a.inputs()) source(in);
    std::ostringstream label;
    a.primitive().print(label);
    const std::string id = "n" + std::to_string(next_node++);
    os << "{ " << id << " [label =" << quoted(label.str()) << ", shape=rectangle]; }\n";
    for (const auto& in : a.inputs()) os << quoted(namer.get_name(in)) << " -> " << id << "\n";
    for (const auto& out : a.outputs()) {
      os << "{ " << (sinks.count(out.id()) ? "rank=sink; " : "") << quoted(namer.get_name(out))
         << "; }\n";
      os << id << " -> " << quoted(namer.get_name(out)) << "\n";
    }
  }
  os << "}\n";
}

void export_to_dot(std::ostream& os, const std::vector<array>& outputs) {
  export_to_dot(os, NodeNamer{}, outputs);
}

}  // namespace tessera
