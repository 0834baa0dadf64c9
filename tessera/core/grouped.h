// Nodes of a graph that run as one task: products of one x with several
// weights, and pairs of nodes that one kernel computes together (the
// primitives of ops/primitives, known here by name).
//
// Note [Grouped products]
// A transformer layer multiplies one activation by several weights in a row:
// q, k and v, then gate and up. Decoding, x has a row or a few, and each of
// those products is a short kernel whose launch costs the host more than the
// GPU spends on it. When a graph is evaluated (group_products, called by
// schedule in core/eval.cpp), the Matmul nodes, or the QuantizedMatmul nodes of equal
// parameters, that share their first input and stream and whose x has at
// most 8 rows, go to the stream as one task of this primitive, at the first
// member's place in the evaluation order. The other members' other inputs
// must be evaluated, or computed from evaluated arrays by at most three
// nodes (views of the weights in practice: w.T, its broadcast), which then
// run just before the group. On the GPU one launch computes all of them
// where the matrix-vector kernels apply (gpu::grouped_products: Note [Dense
// GEMV], Note [Quantized GEMV]), else each member's kernel runs in turn, as
// on the CPU. The results are the members' own, bit for bit.
// TESSERA_GROUP_PRODUCTS=0 turns the grouping off (to measure it).
//   The group exists only in a task, never in a graph: it has no transform
// rules, and tracers (graphs that transforms read later) are not grouped.
//
// Note [Fused pairs]
// Three more pairs of nodes follow each other in every layer of a decoding
// step, each a launch of a few microseconds of host time for a kernel that
// moves a few kilobytes:
//   - add_norm: an Add whose sum an RMSNorm or LayerNorm normalises (a
//     residual connection, then the norm that opens the next sublayer): one
//     kernel writes the sum and its norm;
//   - rope_pair: two RoPE nodes of equal parameters (the queries and keys of
//     a layer): one launch rotates both;
//   - update_pair: two SliceUpdate nodes of equal parameters (the keys and
//     values written into a KV cache): one launch copies both windows.
// group_tasks finds them as it finds products: the second member runs at the
// first's place, and its other inputs must be ready there (evaluated, made
// earlier, or made by at most three nodes that then run just before the
// pair: the views of the keys before their rotation, of the values before
// their update). The pair is a FusedPair task; on the GPU one launch
// computes both members where the kernels cover them (backend/cuda/grouped.cpp),
// else each member's own kernel runs in turn, as on the CPU. The results are
// the members' own, bit for bit (the fused norm rounds the sum to its dtype
// before normalising it, as the two kernels do). TESSERA_FUSE_PAIRS=0 turns
// the pairs off.
#pragma once

#include <memory>
#include <vector>

#include "tessera/core/primitive.h"

namespace tessera {

class GroupedProducts : public Primitive {
 public:
  // members: Matmul or QuantizedMatmul primitives of one stream; arity[i]
  // their input counts (x included).
  GroupedProducts(Stream s, std::vector<std::shared_ptr<Primitive>> members,
                  std::vector<int> arity);

  // inputs: x, then each member's inputs after its x; outputs: one a member.
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_EVAL_GPU_MULTI
  const char* name() const override { return "GroupedProducts"; }

  size_t size() const { return members_.size(); }
  UnaryPrimitive& member(size_t i) const { return *members_[i]->as_unary(); }
  // Member i's inputs: x, then its own.
  std::vector<array> member_inputs(size_t i, const std::vector<array>& inputs) const;

 private:
  std::vector<std::shared_ptr<Primitive>> members_;
  std::vector<int> arity_;
};

enum class GroupKind { products, add_norm, rope_pair, update_pair };

// Two nodes of one output each, run as one task (Note [Fused pairs]).
class FusedPair : public Primitive {
 public:
  // first_arity: the first member's input count.
  FusedPair(Stream s, GroupKind kind, std::shared_ptr<Primitive> first,
            std::shared_ptr<Primitive> second, int first_arity);

  // inputs: the first member's, then the second's (add_norm: but its x, the
  // sum); outputs: the first member's, then the second's.
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_EVAL_GPU_MULTI
  const char* name() const override;

  GroupKind kind() const { return kind_; }
  Primitive& first() const { return *first_; }
  Primitive& second() const { return *second_; }
  std::vector<array> first_inputs(const std::vector<array>& inputs) const;
  std::vector<array> second_inputs(const std::vector<array>& inputs,
                                   const std::vector<array>& outputs) const;
  // Each member's own kernel on `device`, one after the other. The task's
  // inputs move to the members, so that a member's kernel may take over an
  // input's buffer (Note [Donation] in core/eval.cpp): the caller holds no
  // other handle of them.
  void run_in_turn(const std::vector<array>& inputs, std::vector<array>& outputs,
                   Device::DeviceType device);

 private:
  GroupKind kind_;
  std::shared_ptr<Primitive> first_, second_;
  int first_arity_;
};

// A group in a tape (a graph's unevaluated nodes in evaluation order): its
// kind, the places of its members, the first (where the group runs) first,
// and the places after the first of the nodes its members need (views of
// their weights: w.T, its broadcast), which run just before the group.
struct TaskGroup {
  GroupKind kind;
  std::vector<size_t> members;
  std::vector<size_t> hoisted;
};

// The groups of a tape: see Note [Grouped products] and Note [Fused pairs].
std::vector<TaskGroup> group_tasks(const std::vector<array>& tape);

}  // namespace tessera
