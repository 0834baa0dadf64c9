// Note [Object pool]
// Building a graph allocates a few small objects per op (the array's
// descriptor, its node, its data handle) and evaluating it frees them, often
// thousands at a time: a chain of 10,000 ops holds all of them until eval.
// That pattern defeats malloc's per-thread caches (a handful of blocks per
// size), and malloc and free took a quarter of the time of a Python `a + b`.
// Those objects therefore come from per-thread free lists by size class of
// 16 bytes, up to 512 bytes, each list keeping up to 4 MiB. A block freed on
// another thread joins that thread's list; all blocks are operator new
// memory, so any thread may also give one back to the system.
#pragma once

#include <cstddef>

namespace tessera::pool {

void* allocate(size_t bytes);
void deallocate(void* p, size_t bytes);

// For std::allocate_shared.
template <typename T>
struct Allocator {
  using value_type = T;
  Allocator() = default;
  template <typename U>
  Allocator(const Allocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(pool::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { pool::deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const Allocator<U>&) const {
    return true;
  }
};

}  // namespace tessera::pool
