#include "tessera/memory/pool.h"

#include <new>

namespace tessera::pool {

namespace {

constexpr size_t kGranule = 16;
constexpr size_t kMaxBytes = 512;
constexpr size_t kClasses = kMaxBytes / kGranule + 1;
constexpr size_t kKeepBytes = size_t{4} << 20;

struct Lists {
  void* head[kClasses] = {};
  size_t count[kClasses] = {};
  ~Lists();
};

// False once this thread's lists are destroyed (at thread or process exit):
// later frees go straight back to the system.
thread_local bool tl_alive = false;
thread_local Lists tl_lists;

Lists::~Lists() {
  tl_alive = false;
  for (size_t c = 0; c < kClasses; ++c) {
    while (head[c]) {
      void* p = head[c];
      head[c] = *static_cast<void**>(p);
      ::operator delete(p);
    }
  }
}

Lists* lists() {
  if (!tl_alive) {
    static thread_local bool constructed = false;
    if (constructed) return nullptr;  // destroyed already
    constructed = true;
    tl_alive = true;
  }
  return &tl_lists;
}

// The size class of `bytes` (a free block holds the list's link).
size_t size_class(size_t bytes) { return bytes <= kGranule ? 1 : (bytes + kGranule - 1) / kGranule; }

}  // namespace

void* allocate(size_t bytes) {
  const size_t c = size_class(bytes);
#if defined(__SANITIZE_ADDRESS__)
  return ::operator new(c * kGranule);  // every block checked by the sanitizer
#endif
  if (bytes > kMaxBytes) return ::operator new(bytes);
  Lists* l = lists();
  if (l && l->head[c]) {
    void* p = l->head[c];
    l->head[c] = *static_cast<void**>(p);
    --l->count[c];
    return p;
  }
  return ::operator new(c * kGranule);
}

void deallocate(void* p, size_t bytes) {
  const size_t c = size_class(bytes);
#if defined(__SANITIZE_ADDRESS__)
  ::operator delete(p);
  return;
#endif
  Lists* l = bytes > kMaxBytes ? nullptr : lists();
  if (!l || l->count[c] * c * kGranule >= kKeepBytes) {
    ::operator delete(p);
    return;
  }
  *static_cast<void**>(p) = l->head[c];
  l->head[c] = p;
  ++l->count[c];
}

}  // namespace tessera::pool
