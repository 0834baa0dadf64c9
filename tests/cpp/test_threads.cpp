// Evaluation from many threads at once (Note [Concurrent evaluation] in
// core/eval.cpp): threads that share unevaluated arrays, one compiled
// function, their own streams, and async_eval waited for elsewhere. Values
// are checked against loops written here; the point is also that nothing
// crashes or hangs, which the sanitizers check.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <barrier>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/backend/cpu/threading.h"
#include "tessera/tessera.h"
#include "tessera/transforms/compile.h"

using namespace tessera;

namespace {

constexpr int kThreads = 4;

// Runs work(i) on kThreads threads released together; counts the failures.
int run_together(const std::function<void(int)>& work) {
  std::barrier start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        work(i);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << i << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  return failures.load();
}

TEST(Threads, EvaluateOneUnevaluatedArray) {
  for (int round = 0; round < 300; ++round) {
    array a = matmul(ones({16, 16}), ones({16, 16}));
    std::vector<float> got(kThreads);
    ASSERT_EQ(run_together([&](int i) {
                if (i % 2) eval({a});
                got[i] = slice(a, {0, 0}, {1, 1}).item<float>();
              }),
              0);
    for (float g : got) ASSERT_EQ(g, 16.f) << "round " << round;
  }
}

TEST(Threads, ShareAChainAcrossStreams) {
  std::vector<Stream> streams;
  for (int i = 0; i < kThreads; ++i) {
    // Half the threads branch off on a stream of their own.
    streams.push_back(i % 2 ? new_stream(Device::cpu) : default_stream(Device::cpu));
  }
  for (int round = 0; round < 100; ++round) {
    array base = arange(0.0, 12.0, float32);
    for (int k = 0; k < 10; ++k) base = subtract(multiply(base, array(2.f)), array(1.f));
    std::vector<array> got(kThreads, array(0.f));
    ASSERT_EQ(run_together([&](int i) {
                array r = add(base, array(float(i)), streams[i]);
                eval({r});
                got[i] = r;
              }),
              0);
    for (int i = 0; i < kThreads; ++i) {
      const float* p = got[i].data<float>();
      for (int e = 0; e < 12; ++e) {
        double want = e;
        for (int k = 0; k < 10; ++k) want = want * 2 - 1;
        ASSERT_EQ(p[e], float(want + i)) << "round " << round << " thread " << i;
      }
    }
  }
}

TEST(Threads, CallOneCompiledFunction) {
  VecFn f = compile([](const std::vector<array>& x) {
    return std::vector<array>{sum(add(matmul(x[0], x[1]), array(1.f)), 0)};
  });
  for (int round = 0; round < 150; ++round) {
    std::vector<float> got(kThreads);
    ASSERT_EQ(run_together([&](int i) {
                array a = full({8, 8}, float(i + 1));
                got[i] = sum(f({a, ones({8, 8})})[0]).item<float>();
              }),
              0);
    // Each entry of a b is 8 (i + 1); plus one, summed over 64 entries.
    for (int i = 0; i < kThreads; ++i) ASSERT_EQ(got[i], 64.f * (8 * (i + 1) + 1));
  }
}

TEST(Threads, AsyncEvalWaitedForByOthers) {
  for (int round = 0; round < 200; ++round) {
    array a = multiply(arange(0.0, 64.0, float32), array(2.f));
    array b = sum(a);
    std::vector<float> got(kThreads);
    ASSERT_EQ(run_together([&](int i) {
                if (i == 0) async_eval({b});
                got[i] = b.item<float>();
              }),
              0);
    for (float g : got) ASSERT_EQ(g, 63.f * 64.f);
  }
}

TEST(Threads, ErrorsStayWithTheirArrays) {
  for (int round = 0; round < 50; ++round) {
    ASSERT_EQ(run_together([&](int i) {
                array a = add(ones({3}), array(float(i)));
                if (i % 2) {
                  EXPECT_THROW(reshape(a, {7}), std::invalid_argument);
                }
                EXPECT_EQ(sum(a).item<float>(), 3.f * (1 + i));
              }),
              0);
  }
}

// Note [Retired arrays] in core/eval.cpp: a stream worker leaves the small
// objects of a finished task's inputs for later, but their buffers return at
// once, before the evaluation is waited for.
TEST(Threads, WorkerReturnsTheBuffersOfFinishedInputs) {
  Stream s = new_stream(Device::cpu);
  const size_t before = get_active_memory();
  const int n = 1 << 22;  // exp's output: 16 MiB, read once by sum
  array total = sum(exp(full({n}, 0.5f, float32, s), s), false, s);
  async_eval({total});
  total.wait();
  EXPECT_LT(get_active_memory(), before + (size_t{1} << 20))
      << "the 16 MiB input of sum is still held after the evaluation";
  EXPECT_NEAR(total.item<float>(), n * std::exp(0.5f), n * std::exp(0.5f) * 1e-4);
}

}  // namespace

TEST(Threads, ParallelForIfIdleRunsInlineWhileThePoolIsTaken) {
  // A caller holding a lock that a pool job may wait for (the GPU state's
  // mutex during an upload) must not wait for the pool: while another
  // thread's parallel region holds it, parallel_for_if_idle runs every chunk
  // on the calling thread, and when the pool is free it splits the work.
  if (cpu::num_threads() < 2) GTEST_SKIP() << "needs a pool";
  std::atomic<bool> entered{false}, release{false};
  std::thread holder([&] {
    cpu::parallel_for(cpu::num_threads(), 1, [&](int64_t, int64_t) {
      entered = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!entered) std::this_thread::yield();
  const auto self = std::this_thread::get_id();
  std::vector<int> seen(1 << 16, 0);
  std::atomic<int> elsewhere{0};
  cpu::parallel_for_if_idle(static_cast<int64_t>(seen.size()), 1024, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() != self) ++elsewhere;
    for (int64_t i = b; i < e; ++i) seen[i] += 1;
  });
  release = true;
  holder.join();
  EXPECT_EQ(elsewhere.load(), 0);
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << i;
  // The pool free again: the chunks are spread over its threads.
  std::atomic<int> chunks{0};
  std::fill(seen.begin(), seen.end(), 0);
  cpu::parallel_for_if_idle(static_cast<int64_t>(seen.size()), 1024, [&](int64_t b, int64_t e) {
    ++chunks;
    for (int64_t i = b; i < e; ++i) seen[i] += 1;
  });
  EXPECT_GT(chunks.load(), 1);
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << i;
}
