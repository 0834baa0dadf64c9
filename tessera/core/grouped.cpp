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

// A Matmul or QuantizedMatmul node of few rows of x.
bool candidate(const array& a) {
  if (!a.has_primitive() || a.is_tracer()) return false;
  const char* name = a.primitive().name();
  if (std::strcmp(name, "Matmul") != 0 && std::strcmp(name, "QuantizedMatmul") != 0) return false;
  const array& x = a.inputs()[0];
  return x.ndim() > 0 && x.shape(-1) > 0 && int64_t(x.size() / x.shape(-1)) <= kMaxRows;
}

bool same_group(const array& leader, const array& a) {
  const Primitive& p = leader.primitive();
  const Primitive& q = a.primitive();
  return std::strcmp(p.name(), q.name()) == 0 && p.stream() == q.stream() &&
         leader.dtype() == a.dtype() && leader.inputs()[0].is_same(a.inputs()[0]) &&
         p.is_equivalent(q);
}

constexpr size_t kInPlace = ~size_t(0);

// Whether `in`, an input of the node at tape place `below`, will be ready
// when a group runs at place `leader`: evaluated or handed over already, or
// made where the tape runs before the leader (run_at: the place where a node
// runs, or kInPlace for its own), or made from such arrays by nodes at places
// between (at most `depth` deep, none a tracer nor a product), which are
// added to `places` (to run just before the group).
bool ready_by(const std::vector<array>& tape, const std::vector<size_t>& run_at, const array& in,
              size_t leader, size_t below, int depth, std::vector<size_t>& places) {
  if (in.status() != ArrayStatus::unscheduled) return true;
  const size_t reach = below > kHoistReach ? below - kHoistReach : 0;
  for (size_t p = below; p-- > reach;) {
    if (!tape[p].has_primitive() || tape[p].node() != in.node()) continue;
    const size_t at = run_at[p] == kInPlace ? p : run_at[p];
    if (at < leader) return true;
    if (at == leader && at != p) return !candidate(in);  // hoisted for this group already
    if (at != p || p == leader || depth == 0 || in.is_tracer() || candidate(in)) return false;
    for (const array& next : in.inputs()) {
      if (!ready_by(tape, run_at, next, leader, p, depth - 1, places)) return false;
    }
    places.push_back(p);
    return true;
  }
  return false;
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

std::vector<ProductGroup> group_products(const std::vector<array>& tape) {
  static const bool off = [] {
    const char* v = std::getenv("TESSERA_GROUP_PRODUCTS");
    return v && std::strcmp(v, "0") == 0;
  }();
  std::vector<ProductGroup> groups;
  if (off) return groups;
  std::vector<size_t> run_at;  // where members and hoisted nodes run: their leader's place
  std::vector<size_t> places;
  for (size_t i = 0; i < tape.size(); ++i) {
    if (!candidate(tape[i])) continue;
    if (run_at.empty()) run_at.assign(tape.size(), kInPlace);
    bool joined = false;
    for (size_t g = groups.size(); g-- > 0 && groups.size() - g <= kWindow;) {
      ProductGroup& group = groups[g];
      const size_t leader = group.members[0];
      if (group.members.size() == kMaxMembers || !same_group(tape[leader], tape[i])) continue;
      places.clear();
      const auto& in = tape[i].inputs();
      bool ready = true;
      for (size_t j = 1; j < in.size() && ready; ++j) {
        ready = ready_by(tape, run_at, in[j], leader, i, kHoistDepth, places);
      }
      if (!ready) continue;
      group.members.push_back(i);
      run_at[i] = leader;
      for (size_t p : places) {
        if (run_at[p] == kInPlace) group.hoisted.push_back(p);
        run_at[p] = leader;
      }
      joined = true;
      break;
    }
    if (!joined) groups.push_back({{i}, {}});
  }
  std::erase_if(groups, [](const ProductGroup& g) { return g.members.size() < 2; });
  for (auto& g : groups) std::sort(g.hoisted.begin(), g.hoisted.end());
  return groups;
}

}  // namespace tessera
