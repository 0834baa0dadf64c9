// GroupedProducts and the search for its groups (Note [Grouped products] in
// core/grouped.h).
#include "tessera/core/grouped.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tessera {

namespace {

constexpr size_t kMaxMembers = 4;  // gpu::dense_gemv and qmm::gemv take as many matrices
constexpr int64_t kMaxRows = 8;    // rows of x that the matrix-vector kernels take
constexpr size_t kWindow = 8;      // latest groups searched: members sit close in a tape

constexpr int kHoistDepth = 3;     // nodes between a member and its evaluated inputs
constexpr size_t kHoistReach = 16; // tape places searched back for such a node

// What a tape node may be in a group. Nodes are told apart by their
// primitive's name once per tape.
enum class Role : uint8_t { none, product, add, norm, rope, update };

// A Matmul or QuantizedMatmul node of few rows of x; an Add, norm, RoPE or
// SliceUpdate node of one output. None is a tracer.
Role role_of(const array& a) {
  if (!a.has_primitive() || a.is_tracer()) return Role::none;
  const char* n = a.primitive().name();
  auto is = [n](const char* name) { return std::strcmp(n, name) == 0; };
  if (is("Matmul") || is("QuantizedMatmul")) {
    const array& x = a.inputs()[0];
    const bool few_rows =
        x.ndim() > 0 && x.shape(-1) > 0 && int64_t(x.size() / x.shape(-1)) <= kMaxRows;
    return few_rows ? Role::product : Role::none;
  }
  if (a.node()->num_outputs() != 1) return Role::none;
  switch (n[0]) {
    case 'A':
      return is("Add") ? Role::add : Role::none;
    case 'R':
      return is("RMSNorm") ? Role::norm : is("RoPE") ? Role::rope : Role::none;
    case 'L':
      return is("LayerNorm") ? Role::norm : Role::none;
    case 'S':
      return is("SliceUpdate") ? Role::update : Role::none;
    default:
      return Role::none;
  }
}

// The members of a pair of one kind: nodes of one role, one stream, one dtype
// and equivalent parameters.
bool same_pair(const array& leader, const array& a) {
  const Primitive& p = leader.primitive();
  const Primitive& q = a.primitive();
  return p.stream() == q.stream() && leader.dtype() == a.dtype() && p.is_equivalent(q);
}

// Products of one primitive and one x, and as a pair's members.
bool same_product_group(const array& leader, const array& a) {
  return std::strcmp(leader.primitive().name(), a.primitive().name()) == 0 &&
         leader.inputs()[0].is_same(a.inputs()[0]) && same_pair(leader, a);
}

// Whether the environment variable `name` is "0" (a grouping turned off).
bool turned_off(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

constexpr size_t kInPlace = ~size_t(0);

// Builds the groups of a tape, one kind after another; every place belongs
// to one group at most.
class Planner {
 public:
  explicit Planner(const std::vector<array>& tape) : tape_(tape) {
    roles_.reserve(tape.size());
    for (const array& a : tape) {
      roles_.push_back(role_of(a));
      candidates_ += roles_.back() != Role::none;
    }
    if (candidates_ < 2) return;
    run_at_.assign(tape.size(), kInPlace);
    leads_.assign(tape.size(), false);
    member_.assign(tape.size(), false);
  }

  // Whether any group can form.
  bool worth_it() const { return candidates_ >= 2; }

  void products() {
    std::vector<size_t> open;  // groups that take members
    for (size_t i = 0; i < tape_.size(); ++i) {
      if (roles_[i] != Role::product) continue;
      if (!join_recent(open, i, kMaxMembers, 1, same_product_group)) {
        open.push_back(start(GroupKind::products, i));
      }
    }
  }

  // An Add at most kHoistReach places before the norm of its sum.
  void add_norms() {
    for (size_t i = 0; i < tape_.size(); ++i) {
      if (roles_[i] != Role::norm || run_at_[i] != kInPlace || leads_[i]) continue;
      const array& sum = tape_[i].inputs()[0];
      if (sum.status() != ArrayStatus::unscheduled) continue;
      const size_t reach = i > kHoistReach ? i - kHoistReach : 0;
      for (size_t j = i; j-- > reach;) {
        if (!tape_[j].has_primitive() || tape_[j].node() != sum.node()) continue;
        if (roles_[j] == Role::add && run_at_[j] == kInPlace &&
            !leads_[j] && tape_[j].primitive().stream() == tape_[i].primitive().stream()) {
          std::vector<size_t> places;
          if (inputs_ready(i, 1, j, places)) join(start(GroupKind::add_norm, j), i, places);
        }
        break;
      }
    }
  }

  // Two nodes of one role and equivalent parameters.
  void pairs(GroupKind kind, Role role) {
    std::vector<size_t> open;
    for (size_t i = 0; i < tape_.size(); ++i) {
      if (roles_[i] != role || run_at_[i] != kInPlace || leads_[i]) continue;
      if (!join_recent(open, i, 2, 0, same_pair)) open.push_back(start(kind, i));
    }
  }

  std::vector<TaskGroup> take() {
    std::erase_if(groups_, [](const TaskGroup& g) { return g.members.size() < 2; });
    for (auto& g : groups_) std::sort(g.hoisted.begin(), g.hoisted.end());
    return std::move(groups_);
  }

 private:
  size_t start(GroupKind kind, size_t i) {
    groups_.push_back({kind, {i}, {}});
    leads_[i] = true;
    return groups_.size() - 1;
  }

  void join(size_t g, size_t i, const std::vector<size_t>& places) {
    TaskGroup& group = groups_[g];
    const size_t leader = group.members[0];
    group.members.push_back(i);
    run_at_[i] = leader;
    member_[i] = true;
    for (size_t p : places) {
      if (run_at_[p] == kInPlace) group.hoisted.push_back(p);
      run_at_[p] = leader;
    }
  }

  // Joins node i to one of the latest open groups (indices into groups_)
  // whose leader `same` accepts and that has room, if its inputs from
  // `first` on are ready at that leader's place.
  template <typename Same>
  bool join_recent(const std::vector<size_t>& open, size_t i, size_t max_members, size_t first,
                   Same&& same) {
    for (size_t k = open.size(); k-- > 0 && open.size() - k <= kWindow;) {
      const size_t g = open[k];
      const size_t leader = groups_[g].members[0];
      if (groups_[g].members.size() == max_members || !same(tape_[leader], tape_[i])) continue;
      std::vector<size_t> places;
      if (!inputs_ready(i, first, leader, places)) continue;
      join(g, i, places);
      return true;
    }
    return false;
  }

  bool inputs_ready(size_t i, size_t first, size_t leader, std::vector<size_t>& places) const {
    const auto& in = tape_[i].inputs();
    for (size_t j = first; j < in.size(); ++j) {
      if (!ready_by(in[j], leader, i, kHoistDepth, places)) return false;
    }
    return true;
  }

  // Whether `in`, an input of the node at tape place `below`, will be ready
  // when a group runs at place `leader`: evaluated or handed over already, or
  // made where the tape runs before the leader, or made from such arrays by
  // nodes at places between (at most `depth` deep, none a tracer, a product
  // or a group's member or leader), which are added to `places` (to run just
  // before the group).
  bool ready_by(const array& in, size_t leader, size_t below, int depth,
                std::vector<size_t>& places) const {
    if (in.status() != ArrayStatus::unscheduled) return true;
    const size_t reach = below > kHoistReach ? below - kHoistReach : 0;
    for (size_t p = below; p-- > reach;) {
      if (!tape_[p].has_primitive() || tape_[p].node() != in.node()) continue;
      const size_t at = run_at_[p] == kInPlace ? p : run_at_[p];
      if (at < leader) return true;
      if (at == leader && at != p) return !member_[p];  // hoisted for this group already
      if (at != p || p == leader || leads_[p] || depth == 0 || in.is_tracer() ||
          roles_[p] == Role::product) {
        return false;
      }
      for (const array& next : in.inputs()) {
        if (!ready_by(next, leader, p, depth - 1, places)) return false;
      }
      places.push_back(p);
      return true;
    }
    return false;
  }

  const std::vector<array>& tape_;
  std::vector<Role> roles_;
  size_t candidates_ = 0;
  std::vector<size_t> run_at_;  // where members and hoisted nodes run: their leader's place
  std::vector<bool> leads_, member_;
  std::vector<TaskGroup> groups_;
};

// Runs p's kernel on `device` over inputs into out.
void run_member(Primitive& p, Device::DeviceType device, const std::vector<array>& inputs,
                array& out) {
  if (UnaryPrimitive* u = p.as_unary()) {
    device == Device::cpu ? u->eval_cpu(inputs, out) : u->eval_gpu(inputs, out);
    return;
  }
  std::vector<array> outs{out};
  device == Device::cpu ? p.eval_cpu(inputs, outs) : p.eval_gpu(inputs, outs);
}

}  // namespace

GroupedProducts::GroupedProducts(Stream s, std::vector<std::shared_ptr<Primitive>> members,
                                 std::vector<int> arity)
    : Primitive(s), members_(std::move(members)), arity_(std::move(arity)) {}

std::vector<array> GroupedProducts::member_inputs(size_t i,
                                                  const std::vector<array>& inputs) const {
  size_t first = 1;
  for (size_t j = 0; j < i; ++j) first += arity_[j] - 1;
  std::vector<array> out{inputs[0]};
  out.insert(out.end(), inputs.begin() + first, inputs.begin() + first + arity_[i] - 1);
  return out;
}

void GroupedProducts::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (size_t i = 0; i < members_.size(); ++i) {
    member(i).eval_cpu(member_inputs(i, inputs), outputs[i]);
  }
}

FusedPair::FusedPair(Stream s, GroupKind kind, std::shared_ptr<Primitive> first,
                     std::shared_ptr<Primitive> second, int first_arity)
    : Primitive(s), kind_(kind), first_(std::move(first)), second_(std::move(second)),
      first_arity_(first_arity) {}

const char* FusedPair::name() const {
  switch (kind_) {
    case GroupKind::add_norm:
      return std::strcmp(second_->name(), "RMSNorm") == 0 ? "AddRMSNorm" : "AddLayerNorm";
    case GroupKind::rope_pair:
      return "RoPEPair";
    case GroupKind::update_pair:
      return "SliceUpdatePair";
    case GroupKind::products:
      break;
  }
  return "FusedPair";
}

std::vector<array> FusedPair::first_inputs(const std::vector<array>& inputs) const {
  return {inputs.begin(), inputs.begin() + first_arity_};
}

std::vector<array> FusedPair::second_inputs(const std::vector<array>& inputs,
                                            const std::vector<array>& outputs) const {
  std::vector<array> in;
  if (kind_ == GroupKind::add_norm) in.push_back(outputs[0]);
  in.insert(in.end(), inputs.begin() + first_arity_, inputs.end());
  return in;
}

void FusedPair::run_in_turn(const std::vector<array>& inputs, std::vector<array>& outputs,
                            Device::DeviceType device) {
  // The task's own vector (NodeTask::inputs), lent to the members and given
  // back after, for the task to retire (Note [Retired arrays] in core/eval.cpp).
  auto& owned = const_cast<std::vector<array>&>(inputs);
  std::vector<array> first(std::make_move_iterator(owned.begin()),
                           std::make_move_iterator(owned.begin() + first_arity_));
  std::vector<array> second;
  if (kind_ == GroupKind::add_norm) {
    // The sum is published with the task; until then the norm reads it through
    // an evaluated array of its own (a fallback evaluates a graph of it).
    second.emplace_back(outputs[0].shape(), outputs[0].dtype(), nullptr, std::vector<array>{});
  }
  second.insert(second.end(), std::make_move_iterator(owned.begin() + first_arity_),
                std::make_move_iterator(owned.end()));
  owned.clear();
  run_member(*first_, device, first, outputs[0]);
  if (kind_ == GroupKind::add_norm) second[0].copy_shared_buffer(outputs[0]);
  run_member(*second_, device, second, outputs[1]);
  owned = std::move(first);
  const size_t own = kind_ == GroupKind::add_norm ? 1 : 0;
  owned.insert(owned.end(), std::make_move_iterator(second.begin() + own),
               std::make_move_iterator(second.end()));
}

void FusedPair::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_in_turn(inputs, outputs, Device::cpu);
}

std::vector<TaskGroup> group_tasks(const std::vector<array>& tape) {
  if (tape.size() < 2) return {};
  Planner planner(tape);
  if (!planner.worth_it()) return {};
  static const bool products_off = turned_off("TESSERA_GROUP_PRODUCTS");
  static const bool pairs_off = turned_off("TESSERA_FUSE_PAIRS");
  if (!products_off) planner.products();
  if (!pairs_off) {
    planner.add_norms();
    planner.pairs(GroupKind::rope_pair, Role::rope);
    planner.pairs(GroupKind::update_pair, Role::update);
  }
  return planner.take();
}

}  // namespace tessera
