// Einstein summation, its contraction path, and the Kronecker product.
//
//   auto c = einsum("ij,jk->ik", {a, b});          // a matrix product
//   auto t = einsum("ii", {m});                     // the trace
//   auto y = einsum("...ij,...j->...i", {m, v});   // batched, broadcast
//   auto [path, report] = einsum_path("ij,jk,kl->il", {a, b, c});
//   auto k = kron(a, b);
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// NumPy's subscripts: letters, at most one "..." per term, an optional "->"
// output (without it: "..." then the letters that appear once, sorted).
// Repeated letters in a term take diagonals; letters missing from the output
// are summed. Size-1 dimensions broadcast. The operands are contracted two at
// a time in the order einsum_path chooses (the cheapest in multiply-adds:
// exhaustive search for up to 6 operands, greedy beyond), each contraction a
// matrix product over reshaped operands, so derivatives and vmap follow from
// the ops it is made of. The result has the operands' promoted dtype.
array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s = {});

// The contraction order einsum uses (each step: the positions of the operands
// it contracts in the current list; the result goes to the end), and a report.
std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands);

// Kronecker product: the block matrix of a[i] * b over every axis (the operand
// with fewer dimensions gets leading 1s).
array kron(const array& a, const array& b, StreamOrDevice s = {});

}  // namespace tessera
