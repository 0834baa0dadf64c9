// The residency protocol on a machine with a GPU: data written on one device
// and read on the other, streams sharing arrays, eviction under a small
// memory limit, and buffers freed while a copy still reads them. Every value
// is checked against a host computation.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "tessera/core/gpu.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

bool have_gpu() { return is_available(Device::gpu); }

// A float32 array made on the host from v.
array host_array(const std::vector<float>& v, Shape shape) {
  return array(v.begin(), std::move(shape), float32);
}

std::vector<float> iota_values(size_t n, float start = 0.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i % 1000);
  return v;
}

// Restores the memory limit when a test ends, also on failure.
struct LimitGuard {
  size_t old;
  explicit LimitGuard(size_t limit) : old(set_memory_limit(limit)) {}
  ~LimitGuard() { set_memory_limit(old); }
};

}  // namespace

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "needs a GPU"

TEST(Residency, CpuViewsOfGpuResultsReadTheGpuValues) {
  // A view taken on the CPU of an array the GPU computed shares its buffer
  // without touching it: the device copy stays the valid one, and a CPU
  // kernel reading the view downloads it.
  REQUIRE_GPU();
  const int rows = 300, cols = 7;
  auto v = iota_values(rows * cols);
  array g = multiply(host_array(v, {rows, cols}), array(3.f), Device::gpu);
  eval(g);
  array t = transpose(g, Device::cpu);                          // (cols, rows) view
  array b = broadcast_to(reshape(g, {1, rows, cols}, Device::cpu), {2, rows, cols}, Device::cpu);
  array s = sum(t, 1, false, Device::cpu);                      // column sums of g
  array m = matmul(b, ones({cols, 1}, float32, Device::cpu), Device::cpu);  // row sums
  eval(s, m);
  for (int c = 0; c < cols; ++c) {
    double want = 0;
    for (int r = 0; r < rows; ++r) want += 3.0 * v[r * cols + c];
    ASSERT_NEAR(s.data<float>()[c], want, 1e-3 * std::abs(want)) << c;
  }
  for (int r = 0; r < rows; ++r) {
    double want = 0;
    for (int c = 0; c < cols; ++c) want += 3.0 * v[r * cols + c];
    ASSERT_NEAR(m.data<float>()[r], want, 1e-4 * std::abs(want) + 1e-3) << r;
    ASSERT_NEAR(m.data<float>()[rows + r], want, 1e-4 * std::abs(want) + 1e-3) << r;
  }
  // The GPU still reads its own copy, unchanged.
  array back = sum(g, Device::gpu);
  double total = 0;
  for (float x : v) total += 3.0 * x;
  ASSERT_NEAR(back.item<float>(), total, 1e-5 * total);
}

TEST(Residency, CpuWritesGpuReadsCpuReads) {
  REQUIRE_GPU();
  const int n = 1 << 20;
  auto v = iota_values(n);
  array x = host_array(v, {n});
  array y = multiply(x, array(2.f), Device::gpu);  // uploads x
  array z = add(y, array(1.f), Device::cpu);       // downloads y
  eval(z);
  const float* pz = z.data<float>();
  const float* py = y.data<float>();
  for (int i = 0; i < n; i += 997) {
    ASSERT_EQ(py[i], 2 * v[i]) << i;
    ASSERT_EQ(pz[i], 2 * v[i] + 1) << i;
  }
  // A host write through data<T>() makes the device copy stale: the next GPU
  // use sees the new values.
  float* px = x.data<float>();
  for (int i = 0; i < n; ++i) px[i] = -1.f;
  array s = sum(multiply(x, array(3.f), Device::gpu), false, Device::gpu);
  EXPECT_EQ(s.item<float>(), -3.f * n);
  // A CPU op writing over a buffer the GPU has a copy of (a donated input).
  array w = add(y, array(0.5f), Device::cpu);
  array back = sum(w, false, Device::gpu);
  double want = 0;
  for (int i = 0; i < n; ++i) want += 2.0 * v[i] + 0.5;
  EXPECT_NEAR(back.item<float>(), want, want * 1e-5);
}

TEST(Residency, TwoGpuStreamsAndACpuStreamShareArrays) {
  REQUIRE_GPU();
  Stream g1 = new_stream(Device::gpu);
  Stream g2 = new_stream(Device::gpu);
  Stream c = new_stream(Device::cpu);
  const int n = 1 << 18;
  auto v = iota_values(n, 1.f);
  array a = host_array(v, {n});
  std::vector<double> ref(v.begin(), v.end());
  for (int round = 0; round < 8; ++round) {
    array b = multiply(a, array(2.f), g1);  // a: host or CPU-stream result
    array d = add(b, a, g2);                // b from the other GPU stream
    a = subtract(d, multiply(a, array(2.f), c), c);  // back on the CPU: equals a
    a = add(a, array(1.f), round % 2 ? g1 : g2);
    async_eval(a);
    for (auto& r : ref) r += 1;
  }
  array total = sum(a, false, g2);
  eval(total);
  const float* pa = a.data<float>();
  for (int i = 0; i < n; i += 331) ASSERT_EQ(pa[i], ref[i]) << i;
  double want = std::accumulate(ref.begin(), ref.end(), 0.0);
  EXPECT_NEAR(total.item<float>(), want, want * 1e-5);
}

// Note [Tiny ops] (backend/cuda/tiny.h): ops on a few elements are batched
// and launched later. Chains longer than a batch, every batched op and dtype,
// a launched kernel and another stream reading a batched result, and host
// reads after async_eval must all see the values in program order.
TEST(Residency, TinyOpsRunInProgramOrder) {
  REQUIRE_GPU();
  Stream g1 = new_stream(Device::gpu);
  Stream g2 = new_stream(Device::gpu);
  const int n = 37;
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = float(i % 11) - 5;
  std::vector<double> ref(v.begin(), v.end());
  array x = host_array(v, {n});
  for (int k = 0; k < 400; ++k) {  // > 3 batches; values stay small integers
    switch (k % 5) {
      case 0: x = add(x, array(3.f), g1); for (auto& r : ref) r += 3; break;
      case 1: x = multiply(x, array(2.f), g1); for (auto& r : ref) r *= 2; break;
      case 2: x = maximum(subtract(x, array(7.f), g1), array(-50.f), g1);
              for (auto& r : ref) r = std::max(r - 7, -50.0); break;
      case 3: x = minimum(x, array(60.f), g1); for (auto& r : ref) r = std::min(r, 60.0); break;
      case 4: x = divide(x, array(2.f), g1); for (auto& r : ref) r /= 2; break;
    }
    if (k % 97 == 0) async_eval(x);
  }
  // A launched kernel (more than kTinyMax elements) on the same stream and a
  // tiny op on another stream both read the batched result.
  array big = add(zeros({8192}, float32), slice(x, {0}, {1}), g1);  // x[0] broadcast
  array other = multiply(x, array(3.f), g2);
  eval({big, other});
  const float* px = x.data<float>();
  const float* po = other.data<float>();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(px[i], ref[i]) << i;
    ASSERT_EQ(po[i], 3 * ref[i]) << i;
  }
  const float* pb = big.data<float>();
  for (int i = 0; i < 8192; i += 97) ASSERT_EQ(pb[i], ref[0]) << i;

  // Every dtype the batch kernel runs, against the same ops on the CPU.
  for (Dtype t : {float32, float16, bfloat16, float64, int32, uint32, int64, uint64}) {
    array a = astype(arange(0, 300), t), b = astype(add(remainder(arange(0, 300), array(7)), array(1)), t);
    auto chain = [&](StreamOrDevice s) {
      array r = add(multiply(a, b, s), array(3, t), s);
      r = subtract(maximum(r, b, s), minimum(a, b, s), s);
      if (is_floating_point(t)) r = divide(r, b, s);
      return r;
    };
    array g = chain(g1), c = chain(Device::cpu);
    eval({g, c});
    ASSERT_TRUE(array_equal(g, c).item<bool>()) << dtype_name(t);
  }
}

TEST(Residency, EvictionUnderASmallMemoryLimit) {
  REQUIRE_GPU();
  clear_cache();
  const int n = 4 << 20;  // 16 MiB of float32 per array
  const size_t limit = size_t{80} << 20;
  std::vector<array> host, dev;
  std::vector<std::vector<float>> vals;
  {
    LimitGuard guard(limit);
    EXPECT_EQ(get_memory_limit(), limit);
    gpu::reset_peak_memory();
    // 12 host-created arrays (192 MiB) through 80 MiB of device memory, and
    // 12 device-born results, each the only valid copy until evicted.
    for (int i = 0; i < 12; ++i) {
      vals.push_back(iota_values(n, static_cast<float>(i)));
      host.push_back(host_array(vals.back(), {n}));
    }
    for (int i = 0; i < 12; ++i) {
      dev.push_back(multiply(host[i], array(2.f), Device::gpu));
      eval(dev.back());
    }
    std::vector<array> sums;
    for (int i = 0; i < 12; ++i) sums.push_back(sum(add(dev[i], host[i], Device::gpu), false, Device::gpu));
    eval(sums);
    EXPECT_LE(gpu::peak_memory(), limit);
    for (int i = 0; i < 12; ++i) {
      double want = 0;
      for (float f : vals[i]) want += 3.0 * f;
      EXPECT_NEAR(sums[i].item<float>(), want, want * 1e-5) << i;
    }
  }
  // The evicted results were written back before their device copies went.
  for (int i = 0; i < 12; ++i) {
    const float* p = dev[i].data<float>();
    for (int j = 0; j < n; j += 4099) ASSERT_EQ(p[j], 2 * vals[i][j]) << i << " " << j;
  }
  // One array larger than the limit cannot run: a clear error, not a crash.
  {
    LimitGuard guard(size_t{8} << 20);
    array big = multiply(host[0], array(2.f), Device::gpu);
    try {
      eval(big);
      ADD_FAILURE() << "an array over the memory limit evaluated";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
    }
  }
}

TEST(Residency, ArrayFreedWhileItsUploadIsInFlight) {
  REQUIRE_GPU();
  const int n = 64 << 20;  // 256 MiB: the copy takes milliseconds
  for (int round = 0; round < 3; ++round) {
    array x = full({n}, 1.f, float32, Device::cpu);
    eval(x);
    array y = sum(x, false, Device::gpu);
    async_eval(y);
    x = array(0.f);  // x's host block returns to the cache once the copy has read it
    // Likely the same cached block, written at once by the CPU.
    array z = full({n}, 7.f, float32, Device::cpu);
    eval(z);
    EXPECT_EQ(y.item<float>(), static_cast<float>(n)) << round;
    EXPECT_EQ(z.data<float>()[n - 1], 7.f);
  }
}

TEST(Residency, MemoryStatsCountDeviceMemory) {
  REQUIRE_GPU();
  size_t base = gpu::active_memory();
  array y = full({1 << 20}, 2.f, float32, Device::gpu);
  eval(y);
  EXPECT_GE(gpu::active_memory(), base + (4u << 20));
  EXPECT_GE(get_active_memory(), gpu::active_memory());
  EXPECT_EQ(y.data<float>()[12345], 2.f);
}

// Note [Small blocks] in backend/cuda/allocator.cpp: a freed block of up to
// 1 MiB waits in its stream's list, counted as cache memory, and the next
// allocation of its size on that stream takes it back.
TEST(Residency, SmallBlocksAreKeptForReuse) {
  REQUIRE_GPU();
  synchronize();
  clear_cache();
  const size_t before = get_cache_memory();
  {
    array a = full({1000}, 1.f, float32, Device::gpu);
    eval(a);
    EXPECT_EQ(a.data<float>()[999], 1.f);
  }
  const size_t kept = get_cache_memory();
  EXPECT_GE(kept, before + 4096) << "a freed block of 4000 bytes was not kept";
  array b = full({1000}, 2.f, float32, Device::gpu);
  eval(b);
  EXPECT_LE(get_cache_memory() + 4096, kept + 256) << "the block was not taken back";
  EXPECT_EQ(b.data<float>()[999], 2.f);
}

TEST(Residency, PageableHostMemoryGoesUpWholeThroughPinnedPieces) {
  // Borrowed pageable memory of several pieces of the pinned upload ring
  // (Note [Uploads through pinned memory]), not a multiple of a piece: every
  // element arrives, a host write between two uploads is seen by the second,
  // and the memory can be released as soon as the first upload returns.
  REQUIRE_GPU();
  const int n = (10 << 20) + 7;  // 40 MiB and 28 bytes of float32
  std::vector<float> v = iota_values(n, 1.f);
  bool released = false;
  array x(v.data(), {n}, float32, [&](void*) { released = true; });
  array y = multiply(x, array(2.f), Device::gpu);
  eval(y);
  const float* py = y.data<float>();
  for (int i = 0; i < n; i += 4099) ASSERT_EQ(py[i], 2 * v[i]) << i;
  EXPECT_EQ(py[n - 1], 2 * v[n - 1]);
  float* px = x.data<float>();  // a host write: the device copy is stale
  for (int i = n - 5; i < n; ++i) px[i] = -1.f;
  array tail = slice(multiply(x, array(3.f), Device::gpu), {n - 6}, {n});
  eval(tail);
  EXPECT_EQ(tail.data<float>()[0], 3 * v[n - 6]);
  for (int i = 1; i < 6; ++i) EXPECT_EQ(tail.data<float>()[i], -3.f) << i;
  x = array(0.f);
  EXPECT_TRUE(released);
}

TEST(Residency, BorrowedDeviceMemoryIsReadNotWrittenNorEvicted) {
  // Device memory that another library owns (here: a Tessera export, as a
  // DLPack consumer would hold it) imported without a copy: GPU ops read it,
  // never reuse it, and eviction under a small limit leaves it where it is.
  REQUIRE_GPU();
  const int n = 1 << 20;  // 4 MiB of float32
  auto v = iota_values(n);
  array owner = multiply(host_array(v, {n}), array(2.f), Device::gpu);
  eval(owner);
  auto* storage = owner.buffer().storage();
  void* p = gpu::export_device(storage, -1);
  bool released = false;
  {
    array b = array::borrow(p, {n}, {}, float32, Device::gpu, [&] {
      gpu::end_export(storage);
      released = true;
    });
    array y = add(array::borrow(p, {n}, {}, float32, Device::gpu, nullptr), array(1.f), Device::gpu);
    array z = negative(b, Device::gpu);
    eval(y, z);
    {
      // Room for the exported copy (not evictable) and w's input and output:
      // y and z are evicted (written back), the borrowed copy is skipped.
      LimitGuard guard(size_t{13} << 20);
      array w = multiply(host_array(v, {n}), array(3.f), Device::gpu);
      eval(w);
      EXPECT_EQ(w.data<float>()[n - 1], 3 * v[n - 1]);
    }
    const array &cy = y, &cz = z, &cb = b;  // reads only
    for (int j = 0; j < n; j += 997) {
      ASSERT_EQ(cy.data<float>()[j], 2 * v[j] + 1) << j;
      ASSERT_EQ(cz.data<float>()[j], -2 * v[j]) << j;
      ASSERT_EQ(cb.data<float>()[j], 2 * v[j]) << j;  // host copy made on the first read
    }
    array again = sum(b, false, Device::gpu);  // the device copy is still the borrowed one
    double want = 0;
    for (float x : v) want += 2.0 * x;
    EXPECT_NEAR(again.item<float>(), want, want * 1e-5);
    EXPECT_FALSE(released);
  }
  EXPECT_TRUE(released);
  const array& co = owner;
  for (int j = 0; j < n; j += 997) ASSERT_EQ(co.data<float>()[j], 2 * v[j]) << j;
}

// Note [Recorded batches] (backend/cuda/recording.cpp): a stream worker
// records the kernels of each batch into a CUDA graph and replays the graph of
// an earlier batch updated with the new buffers and scalars. Steps of the same
// ops are queued one after the other, each before the last is read (as a
// decoding loop does), while a second thread reads every step's results as
// they come and a CPU op reads a GPU result in between: each value is that of
// its own step. Recording is on when the program runs with
// TESSERA_GPU_GRAPHS=1 (as scripts/gpu-check runs it); without, the same
// steps check the plain launches.
TEST(Residency, RecordedBatchesGiveEachStepItsOwnValues) {
  REQUIRE_GPU();
  Stream g = new_stream(Device::gpu);
  const int side = 64, n = side * side, steps = 48, chain = 12;
  auto v = iota_values(n);
  array x = host_array(v, {side, side});
  array w = multiply(eye(side, float32, Device::gpu), array(2.f), g);  // doubles in a matmul
  eval(x, w);
  const double xsum = std::accumulate(v.begin(), v.end(), 0.0);
  // After the chain, z = x / 2^chain + step * 2 * (1 - 2^-chain); the matmul
  // by 2I and the transposed view keep the sum doubled.
  auto expected_sum = [&](int step) {
    const double f = std::ldexp(1.0, -chain);
    return 2 * (xsum * f + static_cast<double>(n) * step * 2 * (1 - f));
  };
  std::vector<array> sums(steps, array(0.f)), rows(steps, array(0.f));
  std::atomic<int> queued{0};
  std::vector<double> read(steps, 0.0);
  std::thread reader([&] {
    for (int i = 0; i < steps; ++i) {
      while (queued.load() <= i) std::this_thread::yield();
      read[i] = sums[i].item<float>();
    }
  });
  // Lets the reader finish and joins it, also when an assertion ends the test.
  struct Joiner {
    std::thread& t;
    std::atomic<int>& q;
    int n;
    void join() {
      if (!t.joinable()) return;
      q.store(n);
      t.join();
    }
    ~Joiner() { join(); }
  } joiner{reader, queued, steps};
  for (int step = 0; step < steps; ++step) {
    array z = x;
    for (int k = 0; k < chain; ++k) {
      z = add(multiply(z, array(0.5f), g), array(static_cast<float>(step)), g);
    }
    z = transpose(matmul(z, w, g), g);
    sums[step] = sum(z, false, g);
    rows[step] = sum(z, 0, false, g);  // column sums of z's transpose: row sums of z
    async_eval(sums[step], rows[step]);
    queued.store(step + 1);
    if (step > 0) {
      // A CPU op on the last step's GPU result, queued while this one records.
      array twice = multiply(rows[step - 1], array(2.f), Device::cpu);
      eval(twice);
      const double f = std::ldexp(1.0, -chain);
      for (int r = 0; r < side; r += 7) {
        double want = 0;
        for (int c = 0; c < side; ++c) want += v[r * side + c] * f + (step - 1) * 2 * (1 - f);
        ASSERT_NEAR(twice.data<float>()[r], 4 * want, 1e-4 * std::abs(4 * want)) << step << " " << r;
      }
    }
  }
  joiner.join();
  for (int step = 0; step < steps; ++step) {
    const double want = expected_sum(step);
    ASSERT_NEAR(read[step], want, 1e-5 * want) << step;
    ASSERT_NEAR(sums[step].item<float>(), want, 1e-5 * want) << step;
  }
}
