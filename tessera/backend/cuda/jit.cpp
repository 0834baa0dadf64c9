#include "tessera/backend/cuda/jit.h"

#include <cuda.h>
#include <nvrtc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "tessera/backend/cuda/device.h"

namespace tessera::gpu::jit {

namespace {

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS) {
    throw std::runtime_error(std::string("[jit] ") + call + " failed: " + nvrtcGetErrorString(r));
  }
}

// The driver functions the cache needs, from the runtime's entry points.
struct Driver {
  decltype(&cuModuleLoadData) module_load_data = nullptr;
  decltype(&cuModuleLoadDataEx) module_load_data_ex = nullptr;
  decltype(&cuModuleGetFunction) module_get_function = nullptr;
  decltype(&cuFuncSetAttribute) func_set_attribute = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuGetErrorString) get_error_string = nullptr;

  Driver() {
    load("cuModuleLoadData", module_load_data);
    load("cuModuleLoadDataEx", module_load_data_ex);
    load("cuModuleGetFunction", module_get_function);
    load("cuFuncSetAttribute", func_set_attribute);
    load("cuLaunchKernel", launch_kernel);
    load("cuGetErrorString", get_error_string);
  }
  template <typename F>
  static void load(const char* symbol, F& f) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status;
#if CUDART_VERSION >= 12050
    TESSERA_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status));
#else
    TESSERA_CUDA_CHECK(cudaGetDriverEntryPoint(symbol, &p, cudaEnableDefault, &status));
#endif
    if (status != cudaDriverEntryPointSuccess || !p) {
      throw std::runtime_error(std::string("[jit] the CUDA driver has no ") + symbol);
    }
    f = reinterpret_cast<F>(p);
  }
  void check(CUresult r, const char* call) const {
    if (r == CUDA_SUCCESS) return;
    const char* msg = "unknown error";
    if (get_error_string) get_error_string(r, &msg);
    throw std::runtime_error(std::string("[jit] ") + call + " failed: " + msg);
  }
};

const Driver& driver() {
  static const Driver d;
  return d;
}

// 128 bits of FNV-1a over two offsets: the name of a cache file.
std::string hash_name(const std::string& key) {
  uint64_t a = 1469598103934665603ull, b = 1099511628211ull * 31 + 7;
  for (unsigned char c : key) {
    a = (a ^ c) * 1099511628211ull;
    b = (b ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

// The newest architecture this NVRTC compiles to that is not newer than arch;
// whether it is arch itself.
std::pair<int, bool> target_arch(int arch) {
  int n = 0;
  check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(n);
  check_nvrtc(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  int best = 0;
  for (int a : archs) {
    if (a == arch) return {arch, true};
    if (a < arch && a > best) best = a;
  }
  if (best == 0) {
    throw std::runtime_error("[jit] NVRTC " + nvrtc_version() +
                             " compiles for no architecture up to sm_" + std::to_string(arch));
  }
  return {best, false};
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, void*> functions;  // key + device -> CUfunction
};

Cache& cache() {
  static Cache* c = new Cache;  // modules stay loaded until the process ends
  return *c;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return {};
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::filesystem::path& p, const std::string& data) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) return;
  auto tmp = p;
  tmp += ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) return;
  }
  std::filesystem::rename(tmp, p, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

bool is_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

}  // namespace

std::vector<std::string> toolkit_include_dirs() {
  static const std::vector<std::string> dirs = [] {
    std::vector<std::string> candidates;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      if (const char* home = std::getenv(var); home && *home) {
        candidates.push_back(std::string(home) + "/include");
      }
    }
#ifdef TESSERA_CUDA_INCLUDE_DIR
    candidates.push_back(TESSERA_CUDA_INCLUDE_DIR);  // the toolkit of the build (CMakeLists.txt)
#endif
    candidates.push_back("/usr/local/cuda/include");
    for (const auto& dir : candidates) {
      if (!is_file(std::filesystem::path(dir) / "cooperative_groups.h")) continue;
      std::vector<std::string> found{dir};
      if (std::error_code ec; std::filesystem::is_directory(std::filesystem::path(dir) / "cccl", ec)) {
        found.push_back(dir + "/cccl");
      }
      return found;
    }
    return std::vector<std::string>{};
  }();
  return dirs;
}

std::string cache_directory() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/tessera/kernels";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.cache/tessera/kernels";
  }
  return {};
}

std::string compile(const std::string& source, int arch, Headers headers) {
  std::vector<std::string> flags;
  if (headers == Headers::toolkit) {
    const auto dirs = toolkit_include_dirs();
    if (dirs.empty()) {
      throw std::runtime_error(
          "[jit] the CUDA toolkit's headers (cooperative_groups.h) were not found in "
          "$CUDA_HOME/include, $CUDA_PATH/include or /usr/local/cuda/include: set CUDA_HOME "
          "to the toolkit's directory");
    }
    for (const auto& dir : dirs) flags.push_back("--include-path=" + dir);
  }
  auto [target, exact] = target_arch(arch);
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), "tessera_jit.cu", 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  std::string arch_flag = (exact ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") +
                          std::to_string(target);
  std::vector<const char*> options{arch_flag.c_str(), "--std=c++17", "-default-device"};
  for (const auto& flag : flags) options.push_back(flag.c_str());
  nvrtcResult r =
      nvrtcCompileProgram(prog, static_cast<int>(options.size()), options.data());
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetProgramLogSize(prog, &size);
    std::string log(size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    nvrtcDestroyProgram(&prog);
    throw std::runtime_error(std::string("[jit] NVRTC could not compile a kernel: ") +
                             nvrtcGetErrorString(r) + "\n" + log);
  }
  std::string binary;
  size_t size = 0;
  if (exact) {
    check_nvrtc(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    binary.resize(size);
    check_nvrtc(nvrtcGetCUBIN(prog, binary.data()), "nvrtcGetCUBIN");
  } else {
    check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    binary.resize(size);
    check_nvrtc(nvrtcGetPTX(prog, binary.data()), "nvrtcGetPTX");
  }
  nvrtcDestroyProgram(&prog);
  return binary;
}

int device_arch(int device) {
  const auto& props = properties(device);
  return props.major * 10 + props.minor;
}

void* kernel(const std::string& source, const char* name, int device, Headers headers) {
  const int arch = device_arch(device);
  const std::string key =
      hash_name(source + "\n" + name + "\nsm_" + std::to_string(arch) + "\nnvrtc " +
                nvrtc_version() + (headers == Headers::toolkit ? "\ntoolkit headers" : ""));
  const std::string memory_key = key + "/" + std::to_string(device);
  Cache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    if (auto it = c.functions.find(memory_key); it != c.functions.end()) return it->second;
  }
  // Compiled without the lock: other kernels load meanwhile; two threads
  // that build the same kernel keep the first one stored.
  const Driver& d = driver();
  TESSERA_CUDA_CHECK(cudaSetDevice(device));
  CUmodule module = nullptr;
  const std::string dir = cache_directory();
  const std::filesystem::path file =
      dir.empty() ? std::filesystem::path() : std::filesystem::path(dir) / (key + ".bin");
  if (!dir.empty()) {
    std::string cached = read_file(file);
    if (!cached.empty() && d.module_load_data(&module, cached.data()) != CUDA_SUCCESS) {
      module = nullptr;
    }
  }
  if (!module) {
    std::string binary = compile(source, arch, headers);
    d.check(d.module_load_data(&module, binary.data()), "cuModuleLoadData");
    if (!dir.empty()) write_file(file, binary);
  }
  CUfunction f = nullptr;
  d.check(d.module_get_function(&f, module, name), "cuModuleGetFunction");
  std::lock_guard lock(c.mutex);
  return c.functions.emplace(memory_key, reinterpret_cast<void*>(f)).first->second;
}

void* load(const std::string& binary, const char* name, int device) {
  const std::string memory_key =
      "binary " + hash_name(binary) + "/" + name + "/" + std::to_string(device);
  Cache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    if (auto it = c.functions.find(memory_key); it != c.functions.end()) return it->second;
  }
  const Driver& d = driver();
  TESSERA_CUDA_CHECK(cudaSetDevice(device));
  // PTX is text that the driver reads up to its terminating NUL, which
  // std::string keeps after the data; a cubin carries its own size.
  char log[4096] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(sizeof(log) - 1)};
  CUmodule module = nullptr;
  CUresult r = d.module_load_data_ex(&module, binary.c_str(), 2, options, values);
  if (r != CUDA_SUCCESS) {
    const char* msg = "unknown error";
    d.get_error_string(r, &msg);
    throw std::runtime_error(std::string("[jit] cuModuleLoadDataEx could not load the binary "
                                         "holding '") +
                             name + "': " + msg + (log[0] ? std::string("\n") + log : ""));
  }
  CUfunction f = nullptr;
  d.check(d.module_get_function(&f, module, name), "cuModuleGetFunction");
  std::lock_guard lock(c.mutex);
  return c.functions.emplace(memory_key, reinterpret_cast<void*>(f)).first->second;
}

void launch(void* f, unsigned grid, unsigned block, void** args, void* stream) {
  launch(f, Dim3{grid}, Dim3{block}, 0, args, stream);
}

void launch(void* f, Dim3 grid, Dim3 block, unsigned shared_bytes, void** args, void* stream) {
  const Driver& d = driver();
  auto function = reinterpret_cast<CUfunction>(f);
  constexpr unsigned kDefaultSharedLimit = 48 * 1024;  // what a kernel gets without asking
  if (shared_bytes > kDefaultSharedLimit) {
    d.check(d.func_set_attribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(shared_bytes)),
            "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  }
  d.check(d.launch_kernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                          shared_bytes, reinterpret_cast<CUstream>(stream), args, nullptr),
          "cuLaunchKernel");
}

}  // namespace tessera::gpu::jit
