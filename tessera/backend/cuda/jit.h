// Kernels compiled at run time: CUDA C++ source compiled by NVRTC for the
// device's architecture, cached in memory and on disk, loaded through the
// driver API (found with cudaGetDriverEntryPoint, so nothing links libcuda).
//
//   void* f = gpu::jit::kernel(source, "tessera_fused", device);   // compiled once
//   void* args[] = {&in, &out, &n};
//   gpu::jit::launch(f, grid, block, args, gpu::cuda_stream(s));
//
// Custom kernels (fast::cuda_kernel) include the CUDA toolkit's headers
// (Headers::toolkit) and launch on 3-D grids with dynamic shared memory;
// fast::precompiled_cuda_kernel loads the user's PTX or cubin (load).
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
#include <vector>

namespace tessera::gpu::jit {

// What a source may include: nothing (the fused kernels carry their prelude),
// or the CUDA toolkit's headers (toolkit_include_dirs).
enum class Headers { none, toolkit };

// The kernel `name` (extern "C") of `source`, on device `device`. Throws
// std::runtime_error with NVRTC's log when the source does not compile.
void* kernel(const std::string& source, const char* name, int device,
             Headers headers = Headers::none);

// The kernel `name` of a PTX text or cubin `binary`, loaded on `device` (once
// per binary and device). Throws std::runtime_error with the driver's log.
void* load(const std::string& binary, const char* name, int device);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// Launches f on a cudaStream_t with one pointer per kernel parameter.
void launch(void* f, unsigned grid, unsigned block, void** args, void* stream);
// The same on a 3-D grid of blocks, with `shared_bytes` of dynamic shared
// memory (above 48 KiB the kernel's limit is raised first).
void launch(void* f, Dim3 grid, Dim3 block, unsigned shared_bytes, void** args, void* stream);

// The binary of `source` for compute capability `arch` (e.g. 90): a cubin
// where this NVRTC knows the architecture, else PTX for the newest one it
// knows. Throws std::runtime_error with the log.
std::string compile(const std::string& source, int arch, Headers headers = Headers::none);

// The include directories of the CUDA toolkit that NVRTC gets for
// Headers::toolkit: the first of $CUDA_HOME, $CUDA_PATH, the toolkit Tessera
// was built with and /usr/local/cuda that has the headers, with its cccl/
// (CUDA 13 keeps cuda/std there). Empty if none has them.
std::vector<std::string> toolkit_include_dirs();

// The compute capability of a device (90 for sm_90).
int device_arch(int device);

// The directory of the disk cache (Note [Kernel cache]); empty if none.
std::string cache_directory();

}  // namespace tessera::gpu::jit
