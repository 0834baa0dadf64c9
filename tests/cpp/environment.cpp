// Linked into every C++ test program, however it is started (ctest, by hand,
// under compute-sanitizer): float32 products run in full float32 on the GPU,
// as the tests' float64 references assume (MLX's default is TF32). A value
// set by the caller stays.
#include <cstdlib>

namespace {

const bool full_float32 = [] { return setenv("MLX_ENABLE_TF32", "0", 0) == 0; }();

}  // namespace
