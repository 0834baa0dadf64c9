#include "tessera/core/eval.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "tessera/core/gpu.h"
#include "tessera/core/grouped.h"
#include "tessera/core/host_profile.h"
#include "tessera/core/primitive.h"
#include "tessera/core/scheduler.h"

namespace tessera {

namespace {

std::atomic<uint32_t> g_visit_epoch{0};

using Tape = std::vector<array>;
using Stack = std::vector<std::pair<array, size_t>>;

// The tape and the traversal stack keep their memory from one evaluation to
// the next on the same thread, so that evaluating a chain of many small ops
// does not grow (and free) both again each time; up to kKeep elements. A
// vector is taken while in use, so a nested eval (from a kernel) finds none
// and allocates its own.
template <typename V>
class Scratch {
 public:
  static constexpr size_t kKeep = size_t(1) << 16;
  static V take() { return std::exchange(kept(), V{}); }
  static void give_back(V&& v) {
    v.clear();
    if (v.capacity() <= kKeep && v.capacity() > kept().capacity()) kept() = std::move(v);
  }

 private:
  static V& kept() {
    thread_local V v;
    return v;
  }
};

// Note [Retired arrays]
// A stream worker that has run a task drops the task's inputs and primitive,
// most often their last handles. Their small host objects (descriptor, shape,
// strides, node, primitive) come from the thread that built the graph; freed
// on the worker, each made the two threads take turns at malloc's arena lock
// (a fifth of the worker's time in a decoding step on an H100, measured with
// bench/host_sampler.c). The worker therefore releases only the data of those
// arrays at once, so that their buffers return as soon as before, and retires
// the rest; the next schedule() or the end of eval() destroys it on the
// calling thread. With kMaxRetired objects waiting, the worker frees its
// own. Inline tasks run on the calling thread and free at once.
class Retired {
 public:
  static constexpr size_t kMaxRetired = size_t{1} << 16;

  // Takes (moves) an input of a finished task that is its last handle, after
  // dropping its data, or the task's primitive if no one else holds it;
  // leaves the caller anything else to drop.
  void take(array& a) {
    if (!a.release_data_if_last()) return;
    std::lock_guard l(mutex_);
    if (arrays_.size() >= kMaxRetired) return;
    arrays_.push_back(std::move(a));
    empty_.store(false, std::memory_order_relaxed);
  }
  void take(std::shared_ptr<Primitive>& p) {
    if (p.use_count() != 1) return;
    std::lock_guard l(mutex_);
    if (primitives_.size() >= kMaxRetired) return;
    primitives_.push_back(std::move(p));
    empty_.store(false, std::memory_order_relaxed);
  }
  // Destroys what is retired, on the calling thread (several threads may
  // drain at once: each destroys what it took).
  void drain() {
    if (empty_.load(std::memory_order_relaxed)) return;
    std::vector<array> arrays;
    std::vector<std::shared_ptr<Primitive>> primitives;
    {
      std::lock_guard l(mutex_);
      arrays.swap(arrays_);
      primitives.swap(primitives_);
      empty_.store(true, std::memory_order_relaxed);
    }
  }

 private:
  std::mutex mutex_;
  std::atomic<bool> empty_{true};
  std::vector<array> arrays_;
  std::vector<std::shared_ptr<Primitive>> primitives_;
};

// Never destroyed: workers may retire objects until the process ends.
Retired& retired() {
  static Retired* r = new Retired();
  return *r;
}

// The unevaluated part of the graph behind `outputs`, in topological order,
// one array per node. Iterative: graphs of millions of nodes are fine. The
// same walk finds the one stream of all nodes, if there is one (`stream`,
// else `mixed`), and, with a GPU, the inputs of GPU nodes that are evaluated
// and valid only on the host, in order of first use (Note [Prefetching]).
struct TapeInfo {
  std::optional<Stream> stream;
  bool mixed = false;
  std::vector<allocator::BufferStorage*> uploads;
};

// Note [Prefetching]
// Before the first task runs, the tape names every GPU task of this
// evaluation and its inputs. Those inputs that are already evaluated and valid
// only on the host are handed to the prefetcher in order of first use: it
// queues their uploads on the copy stream at once, so that transfers overlap
// the compute of earlier tasks instead of each task waiting for its own.
// A buffer of one element is left out: the binary kernels take such an
// operand by value (Note [Scalar operands] in core/array.h), and another
// kernel uploads it when it runs, at no more cost than a prefetch.
void note_uploads(const array& a, std::vector<allocator::BufferStorage*>& uploads) {
  for (auto& in : a.inputs()) {
    if (!in.is_available() || !in.has_data()) continue;
    auto* st = in.buffer().storage();
    if (st && !st->device_valid && st->size > in.itemsize()) uploads.push_back(st);
  }
}

Tape build_tape(const std::vector<array>& outputs, TapeInfo& info) {
  uint32_t epoch = ++g_visit_epoch;
  const bool gpu = gpu::device_count() > 0;
  Tape tape = Scratch<Tape>::take();
  Stack stack = Scratch<Stack>::take();
  for (auto& out : outputs) {
    if (out.status() != ArrayStatus::unscheduled || out.node()->visit_mark == epoch) continue;
    out.node()->visit_mark = epoch;
    stack.emplace_back(out, 0);
    while (!stack.empty()) {
      auto& [arr, next] = stack.back();
      const auto& inputs = arr.inputs();
      if (next < inputs.size()) {
        const array& in = inputs[next++];
        if (in.status() == ArrayStatus::unscheduled && in.node()->visit_mark != epoch) {
          in.node()->visit_mark = epoch;
          stack.emplace_back(in, 0);
        }
      } else {
        const Stream& s = arr.primitive().stream();
        if (!info.stream) {
          info.stream = s;
        } else if (*info.stream != s) {
          info.mixed = true;
        }
        if (gpu && s.device == Device::gpu) note_uploads(arr, info.uploads);
        tape.push_back(std::move(arr));
        stack.pop_back();
      }
    }
  }
  Scratch<Stack>::give_back(std::move(stack));
  return tape;
}

// The task a stream (or an inline evaluation) runs for one node; it waits
// for its inputs (Note [Concurrent evaluation]).
//
// Note [Donation]
// A kernel may reuse the buffer of an input whose array is referenced by the
// task alone (array::is_donatable): no user handle, no later node and no view
// can read it again. For that, nothing else may hold arrays longer than needed:
// the tape hands each array over as it is scheduled and the task drops its
// inputs as soon as the kernel has run.
struct NodeTask {
  std::shared_ptr<Primitive> primitive;
  std::vector<array> inputs;
  // The output of a UnaryPrimitive, else every output in `outputs`: a node of
  // one output allocates no vector.
  std::optional<array> output;
  std::vector<array> outputs;

  template <typename F>
  void for_each_output(F&& f) {
    if (output) f(*output);
    for (auto& out : outputs) f(out);
  }

  void run_kernel() {
    UnaryPrimitive* unary = primitive->as_unary();
    if (primitive->device() == Device::cpu) {
      unary ? unary->eval_cpu(inputs, *output) : primitive->eval_cpu(inputs, outputs);
    } else {
      unary ? unary->eval_gpu(inputs, *output) : primitive->eval_gpu(inputs, outputs);
    }
  }

  void operator()() {
    const bool profiled = host_profile::enabled();
    const int64_t t0 = profiled ? host_profile::now_ns() : 0;
    int64_t t1 = 0;
    const char* name = profiled ? primitive->name() : nullptr;
    std::exception_ptr error;
    for (auto& in : inputs) {
      scheduler::wait_available(in);
      if (in.error()) {
        error = in.error();
        break;
      }
    }
    if (profiled) t1 = host_profile::now_ns();
    if (!error) {
      try {
        if (primitive->device() == Device::cpu) {
          const bool gpu = gpu::device_count() > 0;
          // A kernel may write an input's buffer (donation) that a copy to
          // the device still reads.
          for (auto& in : inputs) {
            auto* st = gpu && in.has_data() ? in.buffer().storage() : nullptr;
            if (st && st->upload_event) gpu::wait_uploads(st);
          }
          run_kernel();
          // The CPU may have written the outputs' buffers (also donated ones
          // that have a device copy): the host copy is now the valid one. A
          // kernel reaches host memory only through data(), which makes the
          // host copy valid first; a buffer whose host copy is still stale
          // was not touched (a view of a device-born array) and keeps its
          // device copy as the valid one.
          if (gpu) {
            for_each_output([](array& out) {
              if (!out.has_data()) return;
              auto* st = out.buffer().storage();
              if (st && st->device && st->host_valid) gpu::host_written(st);
            });
          }
        } else {
          struct Done {
            const Stream& s;
            ~Done() { gpu::task_done(s); }
          } done{primitive->stream()};
          run_kernel();
        }
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (profiled) {
      host_profile::record_task(name, scheduler::current_stream_index() < 0, t1 - t0,
                                host_profile::now_ns() - t1);
    }
    // Release inputs before publishing outputs so their memory returns first.
    if (scheduler::current_stream_index() >= 0) {
      Retired& r = retired();
      r.take(primitive);
      for (auto& in : inputs) r.take(in);
    }
    inputs.clear();
    primitive.reset();
    for_each_output([&](array& out) {
      if (error) out.set_error(error);
      scheduler::set_available(out);
    });
    output.reset();
    outputs.clear();
  }
};

// The task of one tape node, which leaves the node: the task then holds the
// only references to the node's inputs (a tracer's node stays).
NodeTask node_task(array arr) {
  auto* n = arr.node();
  NodeTask task;
  const bool tracer = arr.is_tracer();
  if (n->primitive->as_unary()) {
    task.output = std::move(arr);
  } else if (n->num_outputs() == 1) {
    task.outputs.push_back(arr);
  } else {
    task.outputs.reserve(n->num_outputs());
    auto siblings = arr.siblings();
    for (size_t i = 0; i < n->num_outputs(); ++i) {
      if (static_cast<int>(i) == arr.position()) {
        task.outputs.push_back(arr);
        continue;
      }
      bool found = false;
      for (auto& s : siblings) {
        if (s.position() == static_cast<int>(i)) {
          task.outputs.push_back(s);
          found = true;
          break;
        }
      }
      if (!found) {
        // A dropped sibling: the kernel still writes it, into a temporary.
        task.outputs.push_back(array(n->output_shapes[i], n->output_dtypes[i], nullptr, {}));
      }
    }
  }
  if (tracer) {
    // Transforms walk this graph later (Note [Tracers]): it stays.
    task.primitive = n->primitive;
    task.inputs = n->inputs;
    task.for_each_output([](array& out) { out.set_status(ArrayStatus::scheduled); });
  } else {
    task.primitive = std::move(n->primitive);
    task.inputs = std::move(n->inputs);
    // The node dies with the last detach; the task then holds the only
    // references to the inputs that this node had.
    task.for_each_output([](array& out) {
      out.set_status(ArrayStatus::scheduled);
      out.detach();
    });
  }
  return task;
}

// Takes the node at tape place i, no tracer and of one output, into a group's
// task: its output joins the task's outputs (scheduled, the node detached);
// returns the node's primitive and inputs.
std::pair<std::shared_ptr<Primitive>, std::vector<array>> take_member(Tape& tape, size_t i,
                                                                      NodeTask& task) {
  array arr = std::move(tape[i]);
  auto* n = arr.node();
  std::pair member{std::move(n->primitive), std::move(n->inputs)};
  arr.set_status(ArrayStatus::scheduled);
  arr.detach();
  task.outputs.push_back(std::move(arr));
  return member;
}

// One task for the products of a group (tape positions `members`, none a
// tracer): the members' outputs, x and then each member's other inputs.
NodeTask grouped_task(Tape& tape, const std::vector<size_t>& members) {
  NodeTask task;
  std::vector<std::shared_ptr<Primitive>> primitives;
  std::vector<int> arity;
  for (size_t i : members) {
    auto [primitive, inputs] = take_member(tape, i, task);
    if (task.inputs.empty()) task.inputs.push_back(inputs[0]);
    arity.push_back(static_cast<int>(inputs.size()));
    task.inputs.insert(task.inputs.end(), std::make_move_iterator(inputs.begin() + 1),
                       std::make_move_iterator(inputs.end()));
    primitives.push_back(std::move(primitive));
  }
  const Stream stream = primitives[0]->stream();
  task.primitive =
      std::make_shared<GroupedProducts>(stream, std::move(primitives), std::move(arity));
  return task;
}

// One task for a pair of nodes (Note [Fused pairs] in core/grouped.h): their
// outputs, the first's inputs and then the second's (of an add_norm, all but
// its x, which is the first's output).
NodeTask pair_task(Tape& tape, const TaskGroup& group) {
  NodeTask task;
  auto [first, first_inputs] = take_member(tape, group.members[0], task);
  auto [second, second_inputs] = take_member(tape, group.members[1], task);
  const int first_arity = static_cast<int>(first_inputs.size());
  task.inputs = std::move(first_inputs);
  const size_t skip = group.kind == GroupKind::add_norm ? 1 : 0;
  task.inputs.insert(task.inputs.end(), std::make_move_iterator(second_inputs.begin() + skip),
                     std::make_move_iterator(second_inputs.end()));
  const Stream stream = first->stream();
  task.primitive = std::make_shared<FusedPair>(stream, group.kind, std::move(first),
                                               std::move(second), first_arity);
  return task;
}

// Consecutive tasks of one stream, handed to it together: one queue operation
// and one wake-up per batch instead of per node.
class Batcher {
 public:
  static constexpr size_t kMaxBatch = 128;

  void add(const Stream& stream, NodeTask task) {
    if (!tasks_.empty() && (stream != stream_ || tasks_.size() >= kMaxBatch)) flush();
    stream_ = stream;
    tasks_.push_back(std::move(task));
  }

  void flush() {
    if (tasks_.empty()) return;
    auto batch = std::make_shared<std::vector<NodeTask>>(std::move(tasks_));
    tasks_.clear();
    scheduler::enqueue(stream_, [batch, stream = stream_] {
      gpu::begin_batch(stream);
      for (auto& t : *batch) t();
      gpu::flush(stream);
    });
  }

 private:
  Stream stream_{0, Device::cpu};
  std::vector<NodeTask> tasks_;
};

// Note [Nested evaluation]
// A kernel may evaluate a graph of its own (a fast primitive runs its
// fallback: Note [Fast primitives] in ops/primitives/fast.h). It runs on the
// thread that runs its stream's tasks, so that stream takes no other task
// until the kernel returns. A synchronous eval whose graph is all on that
// stream therefore runs inline on the calling thread, which holds the stream
// already (no begin_inline; the task around it flushes the stream). A
// synchronous graph that needs this stream among others would wait on itself:
// it is refused as a bug.
void check_not_waiting_on_self(const std::vector<array>& tape) {
  for (auto& a : tape) {
    if (scheduler::runs_here(a.primitive().stream())) {
      throw std::logic_error(
          "[eval] a kernel evaluated a graph that spans its own stream and others (bug)");
    }
  }
}

// Note [Concurrent evaluation]
// Threads may evaluate graphs that share nodes at the same time. Each node is
// handed to a stream exactly once: building the tape and handing its nodes
// over (unscheduled -> scheduled, node detached, batches enqueued, an idle
// stream taken inline) is one step under g_claim_mutex, a step that waits on
// nothing. A thread that meets a node another thread has claimed waits for
// its status to become available (scheduler::wait_available), whichever thread
// or stream runs it. Tasks run outside the lock, inline ones too. A claim
// takes every unscheduled ancestor of its outputs, so the tasks of a claim
// wait only on tasks of earlier claims; and a stream is taken inline only
// when nothing is queued on it, under the same lock: no cycle of waits.
std::mutex g_claim_mutex;

// True on the scheduling thread (Note [Scheduling thread]).
thread_local bool tl_scheduling_thread = false;

void schedule(const std::vector<array>& outputs, bool synchronous) {
  std::optional<Stream> inline_stream;
  bool nested = false;
  struct InlineGuard {
    std::optional<Stream>& s;
    bool& nested;
    ~InlineGuard() {
      if (s && !nested) {
        gpu::flush(*s);
        scheduler::end_inline(*s);
      }
    }
  } guard{inline_stream, nested};
  // The tasks to run on this thread (see Note [Inline evaluation]).
  std::vector<NodeTask> here = Scratch<std::vector<NodeTask>>::take();
  // A stream worker evaluating a graph of its own launches what it recorded
  // first (Note [Recorded batches] in backend/cuda/recording.cpp).
  gpu::launch_recorded();
  // The scheduling thread leaves retired objects to the program's thread,
  // which made them (Note [Scheduling thread]).
  if (!tl_scheduling_thread) retired().drain();
  {
    std::lock_guard lock(g_claim_mutex);
    TapeInfo info;
    auto tape = build_tape(outputs, info);
    if (!info.uploads.empty()) gpu::prefetch(info.uploads);
    if (synchronous) {
      if (!info.mixed) inline_stream = info.stream;
      nested = inline_stream && scheduler::runs_here(*inline_stream);
      if (info.mixed) {
        check_not_waiting_on_self(tape);
      } else if (inline_stream && !nested && !scheduler::begin_inline(*inline_stream)) {
        inline_stream.reset();
      }
    }
    if (inline_stream) here.reserve(tape.size());
    Batcher batcher;
    auto hand_over = [&](NodeTask task) {
      const Stream stream = task.primitive->stream();
      if (inline_stream) {
        here.push_back(std::move(task));
      } else {
        batcher.add(stream, std::move(task));
      }
    };
    // Note [Grouped products] and Note [Fused pairs] (core/grouped.h): a
    // group runs as one task at its first member's place, after the nodes it
    // needs from later places.
    constexpr int kAlone = -1, kMoved = -2;
    const auto groups = group_tasks(tape);
    std::vector<int> role;  // per tape place: kAlone, kMoved, or the group it leads
    if (!groups.empty()) {
      role.assign(tape.size(), kAlone);
      for (size_t g = 0; g < groups.size(); ++g) {
        for (size_t i : groups[g].members) role[i] = kMoved;
        for (size_t i : groups[g].hoisted) role[i] = kMoved;
        role[groups[g].members[0]] = static_cast<int>(g);
      }
    }
    for (size_t t = 0; t < tape.size(); ++t) {
      const int r = role.empty() ? kAlone : role[t];
      if (r == kMoved) continue;
      if (r >= 0) {
        for (size_t h : groups[r].hoisted) hand_over(node_task(std::move(tape[h])));
        const TaskGroup& g = groups[r];
        hand_over(g.kind == GroupKind::products ? grouped_task(tape, g.members)
                                                : pair_task(tape, g));
        continue;
      }
      // Moved out so that the tape does not keep results alive (see Note [Donation]).
      hand_over(node_task(std::move(tape[t])));
    }
    batcher.flush();
    Scratch<Tape>::give_back(std::move(tape));
  }
  for (auto& task : here) task();
  Scratch<std::vector<NodeTask>>::give_back(std::move(here));
}

// Note [Scheduling thread]
// async_eval called from a program's thread hands its outputs to a thread of
// its own, which claims their graph and hands its tasks to the streams
// (schedule), and returns at once. In mlx-lm's decoding loop the program's
// thread builds step n + 1's graph, queues it and reads token n: once the GPU
// stream's worker launched its kernels as recorded graphs, that thread
// bounded a 1B model's step on an H100 (1.9 ms a token, of which schedule
// took about a quarter: walking, grouping and handing over some 400 nodes).
// The scheduling thread does that part meanwhile. eval and a read
// (array::wait) of an unscheduled array, and synchronize(), first wait until
// every handed graph is scheduled, so that a graph handed and read at once
// still runs where async_eval sent it; claims
// stay exclusive (Note [Concurrent evaluation]) for the rest: an async_eval
// inline (below) or another thread that reaches nodes of a handed graph first
// claims them itself, and the scheduling thread skips them. What the stream
// workers retire is still destroyed on the program's thread, which made it
// (Note [Retired arrays]).
// A stream worker (a nested evaluation) and a transform's trace schedule on
// the calling thread. It is on with TESSERA_SCHEDULING_THREAD=1: on an H100 it
// first made the 1B step slower (1.95 ms against 1.40 with recorded batches),
// as every read waited for the scheduling of the step after it; reads of
// claimed arrays no longer wait, which is yet to be measured there. An
// error while scheduling leaves the outputs it did not claim unscheduled: the
// next eval or read of them schedules them again, and reports it.
class SchedulingThread {
 public:
  static SchedulingThread& get() {
    // Leaked on purpose, like the stream workers: it may hold arrays at exit.
    static SchedulingThread* t = new SchedulingThread();
    return *t;
  }

  void hand(std::vector<array> outputs) {
    {
      std::lock_guard l(mutex_);
      jobs_.push_back(std::move(outputs));
      pending_.fetch_add(1, std::memory_order_relaxed);
    }
    wake_.notify_one();
  }

  // Blocks until every handed graph is scheduled.
  void wait_scheduled() {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    std::unique_lock l(mutex_);
    done_.wait(l, [&] { return pending_.load(std::memory_order_relaxed) == 0; });
  }

 private:
  SchedulingThread() { std::thread([this] { run(); }).detach(); }

  void run() {
    tl_scheduling_thread = true;
    std::unique_lock l(mutex_);
    while (true) {
      wake_.wait(l, [&] { return !jobs_.empty(); });
      std::vector<array> job = std::move(jobs_.front());
      jobs_.pop_front();
      l.unlock();
      try {
        schedule(job, false);
      } catch (...) {
        // See the note: the next eval or read reports it.
      }
      job.clear();
      l.lock();
      pending_.fetch_sub(1, std::memory_order_release);
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::vector<array>> jobs_;
  std::atomic<size_t> pending_{0};
};

bool scheduling_thread_on() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_SCHEDULING_THREAD");
    return v && std::string(v) == "1";
  }();
  return on;
}

}  // namespace

namespace scheduler {
void wait_handed() {
  if (scheduling_thread_on() && current_stream_index() < 0 && !tl_scheduling_thread) {
    SchedulingThread::get().wait_scheduled();
  }
}
}  // namespace scheduler

void async_eval(std::vector<array> outputs) {
  bool hand = scheduling_thread_on() && scheduler::current_stream_index() < 0 &&
              !array::in_tracing();
  for (auto& out : outputs) hand = hand && !out.is_tracer();
  if (!hand) {
    schedule(outputs, false);
    return;
  }
  retired().drain();
  SchedulingThread::get().hand(std::move(outputs));
}

void eval(std::vector<array> outputs) {
  // A graph handed to the scheduling thread goes to the streams it was meant
  // for, also when it is read at once (Note [Scheduling thread]). Outputs
  // claimed already need no wait (a decoding loop reads token n while step
  // n + 1 is being scheduled).
  for (auto& out : outputs) {
    if (out.status() == ArrayStatus::unscheduled) {
      scheduler::wait_handed();
      break;
    }
  }
  schedule(outputs, true);
  for (auto& out : outputs) out.wait();
  retired().drain();
}

}  // namespace tessera
