// Evaluation of the lazy graph.
//
//   auto c = add(a, b);   // recorded
//   eval(c);              // runs; c.item<float>() etc. are now cheap
//   async_eval(d);        // schedules and returns; d.wait() or reads block
#pragma once

#include <vector>

#include "tessera/core/array.h"

namespace tessera {

void eval(std::vector<array> outputs);
void async_eval(std::vector<array> outputs);

template <typename... Arrays>
void eval(Arrays&&... outputs) {
  eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}
template <typename... Arrays>
void async_eval(Arrays&&... outputs) {
  async_eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}

}  // namespace tessera
