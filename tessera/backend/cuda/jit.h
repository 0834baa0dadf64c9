// Kernels compiled at run time: CUDA C++ source compiled by NVRTC for the
// device's architecture, cached in memory and on disk, loaded through the
// driver API (found with cudaGetDriverEntryPoint, so nothing links libcuda).
//
//   void* f = gpu::jit::kernel(source, "tessera_fused", device);   // compiled once
//   void* args[] = {&in, &out, &n};
//   gpu::jit::launch(f, grid, block, args, gpu::cuda_stream(s));
//
// The header needs no CUDA header (tests compile sources with it).
//
// Note [Kernel cache]
// A kernel is keyed by its source, the architecture it is compiled for and
// NVRTC's version. The binary is kept in memory (per device) and written to
// $XDG_CACHE_HOME/tessera/kernels (else ~/.cache/tessera/kernels) under the
// hash of the key, so a later process loads it without compiling. A cache
// that cannot be written is skipped; a file that cannot be loaded is compiled
// again.
#pragma once

#include <string>

namespace tessera::gpu::jit {

// The kernel `name` (extern "C") of `source`, on device `device`. Throws
// std::runtime_error with NVRTC's log when the source does not compile.
void* kernel(const std::string& source, const char* name, int device);

// Launches f on a cudaStream_t with one pointer per kernel parameter.
void launch(void* f, unsigned grid, unsigned block, void** args, void* stream);

// The binary of `source` for compute capability `arch` (e.g. 90): a cubin
// where this NVRTC knows the architecture, else PTX for the newest one it
// knows. Throws std::runtime_error with the log.
std::string compile(const std::string& source, int arch);

// The compute capability of a device (90 for sm_90).
int device_arch(int device);

// The directory of the disk cache (Note [Kernel cache]); empty if none.
std::string cache_directory();

}  // namespace tessera::gpu::jit
