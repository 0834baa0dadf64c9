// Stream workers: each CPU stream runs its tasks in order on a thread of its own.
//
// Note [Stream events]
// Every task enqueued on a stream gets a sequence number; a stream counts the
// tasks it has finished. "Task k of stream s has run" is then the event
// (s, k): waiting on it needs no allocation (synchronize waits for the last
// task queued). An array is waited for through its status instead (Note
// [Concurrent evaluation] in core/eval.cpp): its task may also run inline.
#pragma once

#include <cstdint>
#include <functional>

#include "tessera/core/device.h"

namespace tessera {
class array;
}

namespace tessera::scheduler {

// Queues task on stream s; returns its sequence number (1, 2, ...).
uint64_t enqueue(const Stream& s, std::function<void()> task);
// The sequence number the next task enqueued on s will get.
uint64_t next_seq(const Stream& s);
bool is_done(int stream_index, uint64_t seq);
// Blocks until task seq of the stream has run.
void wait_for(int stream_index, uint64_t seq);
// Marks a scheduled array available (its data or error published) and wakes
// the threads waiting for it.
void set_available(array& a);
// Blocks until a scheduled array is available, whichever thread or stream runs
// its task (Note [Concurrent evaluation] in core/eval.cpp).
void wait_available(const array& a);
// The stream index of the calling thread when it is a stream worker, else -1.
int current_stream_index();
// Blocks until every graph handed to the scheduling thread is scheduled (Note
// [Scheduling thread] in core/eval.cpp).
void wait_handed();

// Note [Inline evaluation]
// A synchronous eval whose whole graph is on one idle stream runs the tasks on
// the calling thread: same order, same results, no hand-over between threads
// (which dominates the cost of small ops). On a GPU stream the calling thread
// then queues the kernels itself; they still run asynchronously on the GPU. begin_inline(s) succeeds only when s
// has nothing queued or running, and holds s's worker back until end_inline(s).
bool begin_inline(const Stream& s);
void end_inline(const Stream& s);
// True while the calling thread runs the tasks of s: it is s's worker, or it
// holds s inline (Note [Nested evaluation] in core/eval.cpp).
bool runs_here(const Stream& s);

}  // namespace tessera::scheduler
