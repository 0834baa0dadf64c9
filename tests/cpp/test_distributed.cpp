// distributed:: over the group of this process alone, and the streams tied to
// threads (ThreadLocalStream, new_thread_unsafe_stream, clear_streams).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "tessera/tessera.h"

using namespace tessera;

TEST(Distributed, InitGivesTheSingletonGroup) {
  auto g = distributed::init();
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.size(), 1);
  // MPI is available where its library loads; this process was not started by
  // mpirun, so every init gives the group of one.
  void* mpi = dlopen("libmpi.so.40", RTLD_NOW | RTLD_LOCAL);
  // NCCL where its library loads and there is a GPU.
  const char* nccl_path = std::getenv("TESSERA_NCCL_LIBRARY");
  void* nccl = is_available(Device::gpu) ? dlopen(nccl_path ? nccl_path : "libnccl.so.2", RTLD_NOW)
                                         : nullptr;
  if (!nccl && is_available(Device::gpu)) nccl = dlopen("libnccl.so.2", RTLD_NOW);
  EXPECT_EQ(distributed::is_available(), mpi != nullptr || nccl != nullptr);
  EXPECT_EQ(distributed::is_available("mpi"), mpi != nullptr);
  EXPECT_EQ(distributed::is_available("nccl"), nccl != nullptr);
  if (mpi) dlclose(mpi);
  if (nccl) dlclose(nccl);
  for (const char* b : {"ring", "jaccl"}) EXPECT_FALSE(distributed::is_available(b));
  for (const char* b : {"any", "mpi", "ring", "nccl", "jaccl"}) {
    EXPECT_EQ(distributed::init(false, b).size(), 1);
  }
  EXPECT_THROW(distributed::init(true), std::runtime_error);
  EXPECT_THROW(distributed::init(false, "foo"), std::invalid_argument);
  EXPECT_THROW(distributed::is_available("foo"), std::invalid_argument);
  EXPECT_THROW(g.split(0), std::runtime_error);
}

TEST(Distributed, CollectivesAreTheIdentity) {
  array x({1.f, -2.f, 3.5f, 4.f}, {2, 2});
  auto g = distributed::init();
  for (auto f : {&distributed::all_sum, &distributed::all_max, &distributed::all_min,
                 &distributed::all_gather, &distributed::sum_scatter}) {
    array y = f(x, g, {});
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_TRUE(array_equal(y, x).item<bool>());
    EXPECT_TRUE(array_equal(f(x, std::nullopt, Device::cpu), x).item<bool>());
  }
}

TEST(Distributed, PointToPointNeedsAPeer) {
  array x = ones({3});
  EXPECT_THROW(distributed::send(x, 0), std::invalid_argument);
  EXPECT_THROW(distributed::recv({3}, float32, 0), std::invalid_argument);
  EXPECT_THROW(distributed::recv_like(x, 0), std::invalid_argument);
}

TEST(Streams, ThreadLocalStreamResolvesPerThread) {
  ThreadLocalStream t = new_thread_local_stream(Device::cpu);
  EXPECT_EQ(t.device, Device::cpu);
  Stream mine = t.stream();
  EXPECT_EQ(t.stream(), mine);
  EXPECT_NE(mine, default_stream(Device::cpu));
  Stream other = mine;
  float sum = 0;
  std::thread th([&] {
    other = t.stream();
    sum = tessera::sum(ones({4}), false, other).item<float>();
  });
  th.join();
  EXPECT_NE(other, mine);
  EXPECT_EQ(sum, 4.f);
}

TEST(Streams, ClearStreamsRestoresTheDefault) {
  Stream first = default_stream(Device::cpu);
  Stream s = new_thread_unsafe_stream(Device::cpu);
  ThreadLocalStream t = new_thread_local_stream(Device::cpu);
  Stream before = t.stream();
  set_default_stream(s);
  array y = exp(zeros({3}));
  clear_streams();
  EXPECT_EQ(default_stream(Device::cpu), first);
  EXPECT_NE(t.stream(), before);
  EXPECT_TRUE(array_equal(y, ones({3})).item<bool>());
}

TEST(Streams, ClearStreamsResetsTheRandomKey) {
  array fresh = random::key(0);
  std::thread th([&] { fresh = random::KeySequence::default_().key(); });
  th.join();
  random::seed(3);
  EXPECT_TRUE(array_equal(random::KeySequence::default_().key(), random::key(3)).item<bool>());
  clear_streams();
  EXPECT_TRUE(array_equal(random::KeySequence::default_().key(), fresh).item<bool>());
}
