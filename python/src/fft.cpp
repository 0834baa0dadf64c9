// The submodule tessera.core.fft (with stft and istft), and einsum,
// einsum_path, kron and the window functions of tessera.core.
#include "convert.h"

namespace tessera::python {

namespace {

fft::FFTNorm to_norm(const std::string& norm) {
  if (norm == "backward") return fft::FFTNorm::Backward;
  if (norm == "ortho") return fft::FFTNorm::Ortho;
  if (norm == "forward") return fft::FFTNorm::Forward;
  throw std::invalid_argument("[fft] norm must be 'backward', 'ortho' or 'forward', got '" + norm +
                              "'");
}

using OneD = array (*)(const array&, int, int, fft::FFTNorm, StreamOrDevice);
using OneDNoN = array (*)(const array&, int, fft::FFTNorm, StreamOrDevice);
using ND = array (*)(const array&, const Shape&, const std::vector<int>&, fft::FFTNorm,
                     StreamOrDevice);
using NDNoN = array (*)(const array&, const std::vector<int>&, fft::FFTNorm, StreamOrDevice);
using NDAll = array (*)(const array&, fft::FFTNorm, StreamOrDevice);

// s and axes of the n-dimensional transforms: axes=None takes the last len(s)
// axes, or every axis when s is None too.
array nd_call(ND with_n, NDNoN without_n, NDAll all, const array& a,
              const std::optional<std::vector<int>>& s, const std::optional<std::vector<int>>& axes,
              fft::FFTNorm norm, StreamOrDevice st) {
  if (!s && !axes) return all(a, norm, st);
  if (!s) return without_n(a, *axes, norm, st);
  std::vector<int> ax;
  if (axes) {
    ax = *axes;
  } else {
    for (int i = static_cast<int>(s->size()); i > 0; --i) ax.push_back(-i);
  }
  return with_n(a, Shape(s->begin(), s->end()), ax, norm, st);
}


}  // namespace

void init_fft(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("fft", "Discrete Fourier transforms");
  struct OneDEntry { const char* name; OneD with_n; OneDNoN without_n; };
  std::vector<OneDEntry> oned = {
      {"fft", &fft::fft, &fft::fft},
      {"ifft", &fft::ifft, &fft::ifft},
      {"rfft", &fft::rfft, &fft::rfft},
      {"irfft", &fft::irfft, &fft::irfft}};
  for (auto e : oned) {
    def_named(m, e.name, [e](nb::handle a, std::optional<int> n, int axis, const std::string& norm,
                      StreamArg s) {
      array x = to_array(a);
      return n ? e.with_n(x, *n, axis, to_norm(norm), s) : e.without_n(x, axis, to_norm(norm), s);
    }, "a"_a, "n"_a = nb::none(), "axis"_a = -1, "norm"_a = "backward", "stream"_a = nb::none());
  }
  struct NDEntry { const char* name; ND with_n; NDNoN without_n; NDAll all; bool two; };
  std::vector<NDEntry> nd = {
      {"fft2", &fft::fftn, &fft::fftn, &fft::fftn, true},
      {"ifft2", &fft::ifftn, &fft::ifftn, &fft::ifftn, true},
      {"rfft2", &fft::rfftn, &fft::rfftn, &fft::rfftn, true},
      {"irfft2", &fft::irfftn, &fft::irfftn, &fft::irfftn, true},
      {"fftn", &fft::fftn, &fft::fftn, &fft::fftn, false},
      {"ifftn", &fft::ifftn, &fft::ifftn, &fft::ifftn, false},
      {"rfftn", &fft::rfftn, &fft::rfftn, &fft::rfftn, false},
      {"irfftn", &fft::irfftn, &fft::irfftn, &fft::irfftn, false}};
  for (auto e : nd) {
    auto f = [e](nb::handle a, const std::optional<std::vector<int>>& s,
                 const std::optional<std::vector<int>>& axes, const std::string& norm,
                 StreamArg st) {
      return nd_call(e.with_n, e.without_n, e.all, to_array(a), s, axes, to_norm(norm), st);
    };
    if (e.two) {
      def_named(m, e.name, f, "a"_a, "s"_a = nb::none(), "axes"_a.none() = std::vector<int>{-2, -1},
            "norm"_a = "backward", "stream"_a = nb::none());
    } else {
      def_named(m, e.name, f, "a"_a, "s"_a = nb::none(), "axes"_a = nb::none(), "norm"_a = "backward",
            "stream"_a = nb::none());
    }
  }
  def_named(m, "stft", [](nb::handle x, int n_fft, std::optional<int> hop_length,
                          std::optional<int> win_length, nb::handle window, bool center,
                          const std::string& pad_mode, const std::string& norm,
                          std::optional<bool> onesided, StreamArg s) {
    return fft::stft(to_array(x), n_fft, hop_length, win_length, optional_array(window), center,
                     pad_mode, to_norm(norm), onesided, s);
  }, "x"_a, "n_fft"_a = 2048, "hop_length"_a = nb::none(), "win_length"_a = nb::none(),
        "window"_a = nb::none(), "center"_a = true, "pad_mode"_a = "reflect",
        "norm"_a = "backward", "onesided"_a = nb::none(), "stream"_a = nb::none(),
        "Short-time Fourier transform of the last axis, complex64 of shape "
        "(..., n_freq, n_frames).");
  def_named(m, "istft", [](nb::handle stft_matrix, std::optional<int> n_fft,
                           std::optional<int> hop_length, std::optional<int> win_length,
                           nb::handle window, bool center, const std::string& norm,
                           std::optional<bool> onesided, std::optional<int> length, StreamArg s) {
    return fft::istft(to_array(stft_matrix), n_fft, hop_length, win_length, optional_array(window),
                      center, to_norm(norm), onesided, length, s);
  }, "stft_matrix"_a, "n_fft"_a = nb::none(), "hop_length"_a = nb::none(),
        "win_length"_a = nb::none(), "window"_a = nb::none(), "center"_a = true,
        "norm"_a = "backward", "onesided"_a = nb::none(), "length"_a = nb::none(),
        "stream"_a = nb::none(),
        "Inverse short-time Fourier transform: the overlap-added windowed frames divided by the "
        "squared-window envelope.");
  def_named(m, "fftfreq", [](int n, double d, StreamArg s) { return fft::fftfreq(n, d, s); }, "n"_a,
        "d"_a = 1.0, "stream"_a = nb::none());
  def_named(m, "rfftfreq", [](int n, double d, StreamArg s) { return fft::rfftfreq(n, d, s); }, "n"_a,
        "d"_a = 1.0, "stream"_a = nb::none());
  def_named(m, "fftshift", [](nb::handle a, const Axes& axes, StreamArg s) {
    array x = to_array(a);
    return axes ? fft::fftshift(x, to_vec(*axes), s) : fft::fftshift(x, s);
  }, "a"_a, "axes"_a = nb::none(), "stream"_a = nb::none());
  def_named(m, "ifftshift", [](nb::handle a, const Axes& axes, StreamArg s) {
    array x = to_array(a);
    return axes ? fft::ifftshift(x, to_vec(*axes), s) : fft::ifftshift(x, s);
  }, "a"_a, "axes"_a = nb::none(), "stream"_a = nb::none());

  def_named(parent, "einsum", [](const std::string& subscripts, nb::args operands, StreamArg s) {
    return einsum(subscripts, to_array_list(operands), s);
  }, "subscripts"_a, "operands"_a, nb::kw_only(), "stream"_a = nb::none());
  def_named(parent, "einsum_path", [](const std::string& subscripts, nb::args operands) {
    auto [path, report] = einsum_path(subscripts, to_array_list(operands));
    nb::list steps;
    for (const auto& step : path) {
      nb::list t;
      for (int i : step) t.append(i);
      steps.append(nb::tuple(t));
    }
    return nb::make_tuple(steps, report);
  }, "subscripts"_a, "operands"_a);
  def_named(parent, "kron", [](nb::handle a, nb::handle b, StreamArg s) {
    return kron(to_array(a), to_array(b), s);
  }, "a"_a, "b"_a, nb::kw_only(), "stream"_a = nb::none());
  std::vector<std::pair<const char*, array (*)(int, StreamOrDevice)>> windows = {
      {"hanning", &hanning}, {"hamming", &hamming}, {"blackman", &blackman},
      {"bartlett", &bartlett}};
  for (auto [name, f] : windows) {
    def_named(parent, name, [f](int M, StreamArg s) { return f(M, s); }, "M"_a, nb::kw_only(),
               "stream"_a = nb::none());
  }
}

}  // namespace tessera::python
