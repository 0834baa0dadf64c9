// Library calls that must not be recorded into a CUDA graph (Note [Recorded
// batches] in recording.cpp).
#pragma once

namespace tessera::gpu {

// For the life of the object, the calling thread records no kernels into a
// CUDA graph, and what it recorded is launched first: around library calls
// that synchronise or cannot be recorded (cuSOLVER, cuDNN, cuFFT, NCCL).
class NoRecording {
 public:
  NoRecording();
  ~NoRecording();
  NoRecording(const NoRecording&) = delete;
  NoRecording& operator=(const NoRecording&) = delete;
};

}  // namespace tessera::gpu
