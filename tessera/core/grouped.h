// Products of one x with several weights, run as one task (the Matmul and
// QuantizedMatmul primitives of ops/primitives, known here by name).
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

// A group in a tape (a graph's unevaluated nodes in evaluation order): the
// places of its members, the first (where the group runs) first, and the
// places after the first of the nodes its members need (views of their
// weights: w.T, its broadcast), which run just before the group.
struct ProductGroup {
  std::vector<size_t> members;
  std::vector<size_t> hoisted;
};

// The groups of a tape: see Note [Grouped products].
std::vector<ProductGroup> group_products(const std::vector<array>& tape);

}  // namespace tessera
