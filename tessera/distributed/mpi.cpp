// MPI through dlopen (Note [Communicators] in comm.h): Open MPI's libmpi.so.40
// or another libmpi.so with Open MPI's ABI, whose handles (communicators,
// datatypes, operations) are the addresses of its predefined objects.
#include <dlfcn.h>

#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include "tessera/distributed/comm.h"

namespace tessera::distributed::detail {

namespace {

using Handle = void*;

struct Mpi {
  void* lib = nullptr;
  int (*Initialized)(int*);
  int (*Finalized)(int*);
  int (*Init_thread)(int*, char***, int, int*);
  int (*Finalize)();
  int (*Comm_rank)(Handle, int*);
  int (*Comm_size)(Handle, int*);
  int (*Comm_split)(Handle, int, int, Handle*);
  int (*Comm_free)(Handle*);
  int (*Allreduce)(const void*, void*, int, Handle, Handle, Handle);
  int (*Allgather)(const void*, int, Handle, void*, int, Handle, Handle);
  int (*Reduce_scatter_block)(const void*, void*, int, Handle, Handle, Handle);
  int (*Send)(const void*, int, Handle, int, int, Handle);
  int (*Recv)(void*, int, Handle, int, int, Handle, void*);
  int (*Error_string)(int, char*, int*);
  int (*Abort)(Handle, int);
  Handle comm_world, byte, op_sum, op_max, op_min;
  Handle types[32];  // by Dtype::Val; nullptr where MPI has none
  std::mutex mutex;  // every call, whatever thread issues it
};

template <typename F>
void bind(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throw std::runtime_error(std::string("missing symbol ") + name);
}
Handle object(void* lib, const char* name) {
  Handle h = dlsym(lib, name);
  if (!h) throw std::runtime_error(std::string("missing symbol ") + name);
  return h;
}

// The loaded library, or nullptr (once per process).
Mpi* load() {
  static Mpi* mpi = []() -> Mpi* {
    void* lib = nullptr;
    for (const char* name : {"libmpi.so.40", "libmpi.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
    }
    if (!lib) return nullptr;
    auto* m = new Mpi;
    m->lib = lib;
    try {
      bind(lib, m->Initialized, "MPI_Initialized");
      bind(lib, m->Finalized, "MPI_Finalized");
      bind(lib, m->Init_thread, "MPI_Init_thread");
      bind(lib, m->Finalize, "MPI_Finalize");
      bind(lib, m->Comm_rank, "MPI_Comm_rank");
      bind(lib, m->Comm_size, "MPI_Comm_size");
      bind(lib, m->Comm_split, "MPI_Comm_split");
      bind(lib, m->Comm_free, "MPI_Comm_free");
      bind(lib, m->Allreduce, "MPI_Allreduce");
      bind(lib, m->Allgather, "MPI_Allgather");
      bind(lib, m->Reduce_scatter_block, "MPI_Reduce_scatter_block");
      bind(lib, m->Send, "MPI_Send");
      bind(lib, m->Recv, "MPI_Recv");
      bind(lib, m->Error_string, "MPI_Error_string");
      bind(lib, m->Abort, "MPI_Abort");
      m->comm_world = object(lib, "ompi_mpi_comm_world");
      m->byte = object(lib, "ompi_mpi_byte");
      m->op_sum = object(lib, "ompi_mpi_op_sum");
      m->op_max = object(lib, "ompi_mpi_op_max");
      m->op_min = object(lib, "ompi_mpi_op_min");
      for (auto& t : m->types) t = nullptr;
      auto type = [&](Dtype d, const char* name) { m->types[static_cast<int>(d.val)] = object(lib, name); };
      type(uint8, "ompi_mpi_uint8_t");
      type(uint16, "ompi_mpi_uint16_t");
      type(uint32, "ompi_mpi_uint32_t");
      type(uint64, "ompi_mpi_uint64_t");
      type(int8, "ompi_mpi_int8_t");
      type(int16, "ompi_mpi_int16_t");
      type(int32, "ompi_mpi_int32_t");
      type(int64, "ompi_mpi_int64_t");
      type(float32, "ompi_mpi_float");
      type(float64, "ompi_mpi_double");
      type(complex64, "ompi_mpi_c_float_complex");
    } catch (const std::exception&) {
      dlclose(lib);
      delete m;
      return nullptr;
    }
    return m;
  }();
  return mpi;
}

void check(Mpi& m, int err, const char* call) {
  if (err == 0) return;
  char text[512];
  int len = 0;
  m.Error_string(err, text, &len);
  throw std::runtime_error(std::string("[distributed] ") + call + " failed: " +
                           std::string(text, static_cast<size_t>(len)));
}

int as_count(int64_t n, const char* op) {
  if (n > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(std::string("[distributed::") + op + "] " + std::to_string(n) +
                                " elements are more than one MPI message holds (2^31 - 1)");
  }
  return static_cast<int>(n);
}

class MpiComm : public Comm {
 public:
  MpiComm(Mpi& m, Handle comm, bool owned) : m_(m), comm_(comm), owned_(owned) {
    check(m_, m_.Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(m_, m_.Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiComm() override {
    int finalized = 1;
    if (owned_ && m_.Finalized(&finalized) == 0 && !finalized) m_.Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(const void* in, void* out, int64_t count, Dtype t, ReduceOp op,
                  void*) override {
    std::lock_guard l(m_.mutex);
    Handle mop = op == ReduceOp::sum ? m_.op_sum : op == ReduceOp::max ? m_.op_max : m_.op_min;
    check(m_, m_.Allreduce(in, out, as_count(count, "all_reduce"), type(t), mop, comm_),
          "MPI_Allreduce");
  }
  void all_gather(const void* in, void* out, int64_t bytes, void*) override {
    std::lock_guard l(m_.mutex);
    const int n = as_count(bytes, "all_gather");
    check(m_, m_.Allgather(in, n, m_.byte, out, n, m_.byte, comm_), "MPI_Allgather");
  }
  void sum_scatter(const void* in, void* out, int64_t count, Dtype t, void*) override {
    std::lock_guard l(m_.mutex);
    check(m_, m_.Reduce_scatter_block(in, out, as_count(count, "sum_scatter"), type(t), m_.op_sum,
                                      comm_),
          "MPI_Reduce_scatter_block");
  }
  void send(const void* data, int64_t bytes, int dst, void*) override {
    std::lock_guard l(m_.mutex);
    check(m_, m_.Send(data, as_count(bytes, "send"), m_.byte, dst, 0, comm_), "MPI_Send");
  }
  void recv(void* data, int64_t bytes, int src, void*) override {
    // Not under the mutex: a blocking receive would hold every other call
    // (the matching send of another thread among them).
    check(m_, m_.Recv(data, as_count(bytes, "recv"), m_.byte, src, 0, comm_, nullptr), "MPI_Recv");
  }
  bool reduces(Dtype t) const override { return m_.types[static_cast<int>(t.val)] != nullptr; }
  std::shared_ptr<Comm> split(int color, int key) override {
    std::lock_guard l(m_.mutex);
    Handle sub = nullptr;
    check(m_, m_.Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_shared<MpiComm>(m_, sub, true);
  }

 private:
  Handle type(Dtype t) const {
    Handle h = m_.types[static_cast<int>(t.val)];
    if (!h) throw std::logic_error("[distributed] no MPI datatype for " + dtype_name(t) + " (bug)");
    return h;
  }
  Mpi& m_;
  Handle comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

// Launched by an MPI launcher: Open MPI's mpirun, or a PMI-based one.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

}  // namespace

bool mpi_available() { return load() != nullptr; }

std::shared_ptr<Comm> mpi_world() {
  static std::shared_ptr<Comm> world = []() -> std::shared_ptr<Comm> {
    Mpi* m = launched_by_mpi() ? load() : nullptr;
    if (!m) return nullptr;
    int initialized = 0;
    check(*m, m->Initialized(&initialized), "MPI_Initialized");
    if (!initialized) {
      int provided = 0;
      constexpr int kThreadMultiple = 3;  // Open MPI's MPI_THREAD_MULTIPLE
      check(*m, m->Init_thread(nullptr, nullptr, kThreadMultiple, &provided), "MPI_Init_thread");
      std::atexit([] {
        Mpi* mm = load();
        int finalized = 1;
        if (mm && mm->Finalized(&finalized) == 0 && !finalized) mm->Finalize();
      });
    }
    return std::make_shared<MpiComm>(*m, m->comm_world, false);
  }();
  return world;
}

void abort_job(int code) {
  Mpi* m = load();
  int initialized = 0, finalized = 1;
  if (!m || m->Initialized(&initialized) != 0 || !initialized) return;
  if (m->Finalized(&finalized) != 0 || finalized) return;
  m->Abort(m->comm_world, code);
}

}  // namespace tessera::distributed::detail
