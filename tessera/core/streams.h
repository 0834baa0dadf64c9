// Streams tied to threads (MLX's ThreadLocalStream, new_thread_unsafe_stream,
// clear_streams).
//
//   ThreadLocalStream ts = new_thread_local_stream(Device::cpu);
//   auto y = add(x, x, ts.stream());   // the calling thread's stream of ts
//
// Every Tessera stream can take work from any thread (its tasks run in order on
// its own worker), so a thread-unsafe stream is an ordinary one.
#pragma once

#include "tessera/core/device.h"

namespace tessera {

// A handle that stands for one stream per thread: the first time a thread
// resolves it, a new stream on `device` is made for that thread.
struct ThreadLocalStream {
  int index;
  Device device;
  // The calling thread's stream of this handle.
  Stream stream() const;
  bool operator==(const ThreadLocalStream& o) const { return index == o.index; }
};

ThreadLocalStream new_thread_local_stream(Device d);
Stream new_thread_unsafe_stream(Device d);
// Forgets the streams the calling thread made (new_stream, and its streams of
// thread-local handles) after waiting for their work: a thread-local handle
// resolves to a fresh stream afterwards, and a device whose default stream was
// one of them gets its first default stream back. The streams' workers stay, as
// arrays may still refer to their events. Then runs the hooks below.
void clear_streams();
// Registers f to run on the calling thread of each clear_streams(): a module's
// thread-local state (the implicit random key) resets with the streams.
void on_clear_streams(void (*f)());

}  // namespace tessera
