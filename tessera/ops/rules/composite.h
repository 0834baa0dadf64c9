// Derivatives of a primitive that is one function of its inputs written in
// other ops (fast::Custom's fallback, a Compiled node's unfused graph): the
// transforms of that function, restricted to the primitive's argnums.
#pragma once

#include <vector>

#include "tessera/ops/creation.h"
#include "tessera/transforms/transforms.h"

namespace tessera::rules {

inline std::vector<array> composite_vjp(const VecFn& fun, const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums) {
  auto all = tessera::vjp(fun, primals, cotangents).second;
  std::vector<array> out;
  for (int i : argnums) out.push_back(all[i]);
  return out;
}

// The tangents of the inputs outside argnums are zero.
inline std::vector<array> composite_jvp(const VecFn& fun, const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums, StreamOrDevice s) {
  std::vector<array> full;
  for (const array& p : primals) full.push_back(zeros_like(p, s));
  for (size_t k = 0; k < argnums.size(); ++k) full[argnums[k]] = tangents[k];
  return tessera::jvp(fun, primals, full).second;
}

}  // namespace tessera::rules
