// NCCL through dlopen (Note [Communicators] in comm.h): libnccl.so.2, whose
// C API and enumerations are stable since NCCL 2.0 (bfloat16 since 2.10,
// ncclCommSplit since 2.18). The few declarations needed are written here,
// so no NCCL header is needed to build.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/gpu.h"
#include "tessera/distributed/comm.h"

namespace tessera::distributed::detail {

namespace {

using NcclComm_t = void*;
using Result = int;  // ncclResult_t: 0 is ncclSuccess
struct UniqueId {
  char internal[128];
};
// ncclDataType_t and ncclRedOp_t.
enum NcclType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kNoType = -1,
};
enum NcclOp : int { kSum = 0, kMax = 2, kMin = 3 };

struct Nccl {
  Result (*GetUniqueId)(UniqueId*);
  Result (*CommInitRank)(NcclComm_t*, int, UniqueId, int);
  Result (*CommDestroy)(NcclComm_t);
  Result (*CommCount)(NcclComm_t, int*);
  Result (*CommUserRank)(NcclComm_t, int*);
  Result (*CommSplit)(NcclComm_t, int, int, NcclComm_t*, void*);  // may be null (NCCL < 2.18)
  Result (*AllReduce)(const void*, void*, size_t, int, int, NcclComm_t, void*);
  Result (*AllGather)(const void*, void*, size_t, int, NcclComm_t, void*);
  Result (*ReduceScatter)(const void*, void*, size_t, int, int, NcclComm_t, void*);
  Result (*Send)(const void*, size_t, int, int, NcclComm_t, void*);
  Result (*Recv)(void*, size_t, int, int, NcclComm_t, void*);
  const char* (*GetErrorString)(Result);
};

template <typename F>
void bind(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throw std::runtime_error(std::string("missing symbol ") + name);
}

// The loaded library, or nullptr (once per process).
Nccl* load() {
  static Nccl* nccl = []() -> Nccl* {
    void* lib = nullptr;
    if (const char* path = std::getenv("TESSERA_NCCL_LIBRARY")) lib = dlopen(path, RTLD_NOW);
    for (const char* name : {"libnccl.so.2", "libnccl.so"}) {
      if (!lib) lib = dlopen(name, RTLD_NOW);
    }
    if (!lib) return nullptr;
    auto* n = new Nccl;
    try {
      bind(lib, n->GetUniqueId, "ncclGetUniqueId");
      bind(lib, n->CommInitRank, "ncclCommInitRank");
      bind(lib, n->CommDestroy, "ncclCommDestroy");
      bind(lib, n->CommCount, "ncclCommCount");
      bind(lib, n->CommUserRank, "ncclCommUserRank");
      bind(lib, n->AllReduce, "ncclAllReduce");
      bind(lib, n->AllGather, "ncclAllGather");
      bind(lib, n->ReduceScatter, "ncclReduceScatter");
      bind(lib, n->Send, "ncclSend");
      bind(lib, n->Recv, "ncclRecv");
      bind(lib, n->GetErrorString, "ncclGetErrorString");
      n->CommSplit = reinterpret_cast<decltype(n->CommSplit)>(dlsym(lib, "ncclCommSplit"));
    } catch (const std::exception&) {
      dlclose(lib);
      delete n;
      return nullptr;
    }
    return n;
  }();
  return nccl;
}

void check(Nccl& n, Result r, const char* call) {
  if (r == 0) return;
  throw std::runtime_error(std::string("[distributed] ") + call + " failed: " + n.GetErrorString(r));
}

// NCCL's type for t; kNoType where it has none (bool, int16, uint16, complex64).
int nccl_type(Dtype t) {
  switch (t.val) {
    case Dtype::Val::int8: return kInt8;
    case Dtype::Val::uint8: return kUint8;
    case Dtype::Val::int32: return kInt32;
    case Dtype::Val::uint32: return kUint32;
    case Dtype::Val::int64: return kInt64;
    case Dtype::Val::uint64: return kUint64;
    case Dtype::Val::float16: return kFloat16;
    case Dtype::Val::float32: return kFloat32;
    case Dtype::Val::float64: return kFloat64;
    case Dtype::Val::bfloat16: return kBfloat16;
    default: return kNoType;
  }
}

class NcclComm : public Comm {
 public:
  // owned: destroyed with this object (the world's is left to the process's
  // end, when the CUDA runtime may be gone already).
  NcclComm(Nccl& n, NcclComm_t comm, bool owned) : n_(n), comm_(comm), owned_(owned) {
    check(n_, n_.CommUserRank(comm_, &rank_), "ncclCommUserRank");
    check(n_, n_.CommCount(comm_, &size_), "ncclCommCount");
  }
  ~NcclComm() override {
    if (owned_) n_.CommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool device_memory() const override { return true; }
  // complex64 sums add its float32 halves.
  bool reduces(Dtype t) const override { return t == complex64 || nccl_type(t) != kNoType; }

  void all_reduce(const void* in, void* out, int64_t count, Dtype t, ReduceOp op,
                  void* stream) override {
    auto [type, n] = elements(t, count);
    const int nop = op == ReduceOp::sum ? kSum : op == ReduceOp::max ? kMax : kMin;
    std::lock_guard l(mutex_);
    check(n_, n_.AllReduce(in, out, n, type, nop, comm_, stream), "ncclAllReduce");
  }
  void all_gather(const void* in, void* out, int64_t bytes, void* stream) override {
    std::lock_guard l(mutex_);
    check(n_, n_.AllGather(in, out, static_cast<size_t>(bytes), kUint8, comm_, stream),
          "ncclAllGather");
  }
  void sum_scatter(const void* in, void* out, int64_t count, Dtype t, void* stream) override {
    auto [type, n] = elements(t, count);
    std::lock_guard l(mutex_);
    check(n_, n_.ReduceScatter(in, out, n, type, kSum, comm_, stream), "ncclReduceScatter");
  }
  void send(const void* data, int64_t bytes, int dst, void* stream) override {
    std::lock_guard l(mutex_);
    check(n_, n_.Send(data, static_cast<size_t>(bytes), kUint8, dst, comm_, stream), "ncclSend");
  }
  void recv(void* data, int64_t bytes, int src, void* stream) override {
    std::lock_guard l(mutex_);
    check(n_, n_.Recv(data, static_cast<size_t>(bytes), kUint8, src, comm_, stream), "ncclRecv");
  }
  std::shared_ptr<Comm> split(int color, int key) override {
    if (!n_.CommSplit) {
      throw std::runtime_error(
          "[distributed::Group::split] this NCCL has no ncclCommSplit (NCCL 2.18 or newer has)");
    }
    NcclComm_t sub = nullptr;
    {
      std::lock_guard l(mutex_);
      check(n_, n_.CommSplit(comm_, color, key, &sub, nullptr), "ncclCommSplit");
    }
    return std::make_shared<NcclComm>(n_, sub, true);
  }

 private:
  // NCCL's type and element count for count elements of t.
  std::pair<int, size_t> elements(Dtype t, int64_t count) const {
    if (t == complex64) return {kFloat32, static_cast<size_t>(count) * 2};
    const int type = nccl_type(t);
    if (type == kNoType) {
      throw std::logic_error("[distributed] no NCCL datatype for " + dtype_name(t) + " (bug)");
    }
    return {type, static_cast<size_t>(count)};
  }
  Nccl& n_;
  NcclComm_t comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  std::mutex mutex_;
};

}  // namespace

bool nccl_available() { return gpu::device_count() > 0 && load() != nullptr; }

std::shared_ptr<Comm> nccl_world() {
  static std::shared_ptr<Comm> world = []() -> std::shared_ptr<Comm> {
    // Every process of a job takes NCCL, or none does (they would otherwise
    // wait in different libraries' collectives).
    auto mpi = mpi_world();
    const int rank = mpi ? mpi->rank() : 0, size = mpi ? mpi->size() : 1;
    int32_t here = nccl_available() ? 1 : 0, everywhere = here;
    if (size > 1) mpi->all_reduce(&here, &everywhere, 1, int32, ReduceOp::min, nullptr);
    if (!everywhere) return nullptr;
    Nccl& n = *load();
    UniqueId id{};
    if (rank == 0) check(n, n.GetUniqueId(&id), "ncclGetUniqueId");
    if (size > 1) {
      std::vector<UniqueId> ids(static_cast<size_t>(size));
      mpi->all_gather(&id, ids.data(), sizeof(UniqueId), nullptr);
      id = ids[0];
    }
    NcclComm_t comm = nullptr;
    check(n, n.CommInitRank(&comm, size, id, rank), "ncclCommInitRank");
    return std::make_shared<NcclComm>(n, comm, false);
  }();
  return world;
}

}  // namespace tessera::distributed::detail
