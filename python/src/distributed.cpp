// The submodule tessera.core.distributed: the global group and the
// collectives over it; group and stream are keyword-only.
#include "convert.h"
#include "tessera/distributed/comm.h"

namespace tessera::python {

namespace {

// Once a process belongs to a job of several, an exception that ends it ends
// the job (after the usual traceback): the other processes would otherwise
// wait for it forever in their next collective.
void end_job_on_uncaught_exceptions() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  nb::module_ sys = nb::module_::import_("sys");
  nb::object previous = sys.attr("excepthook");
  sys.attr("excepthook") = nb::cpp_function([previous](nb::handle type, nb::handle value,
                                                       nb::handle traceback) {
    previous(type, value, traceback);
    nb::module_ s = nb::module_::import_("sys");
    s.attr("stderr").attr("flush")();
    s.attr("stdout").attr("flush")();
    distributed::detail::abort_job(1);
  });
}

}  // namespace

void init_distributed(nb::module_& parent) {
  using distributed::Group;
  nb::module_ m = parent.def_submodule(
      "distributed", "Communication between processes (a group of this process alone while "
                     "no backend is available)");
  nb::class_<Group>(m, "Group", "A set of processes that communicate.")
      .def("rank", &Group::rank, "This process's rank in the group.")
      .def("size", &Group::size, "The number of processes in the group.")
      .def("split", &Group::split, "color"_a, "key"_a = -1,
           "Sub-groups of the processes passing the same color, ranked by key (negative: "
           "the current rank).");
  def_named(m, "is_available", [](const std::string& backend) { return distributed::is_available(backend); },
        "backend"_a = "any", "Whether this build can start that backend ('any', 'mpi', 'ring', "
        "'nccl', 'jaccl').");
  def_named(m, "init", [](bool strict, const std::string& backend, nb::handle) {
    Group g = distributed::init(strict, backend);
    if (g.size() > 1) end_job_on_uncaught_exceptions();
    return g;
  }, "strict"_a = false, "backend"_a = "any", nb::kw_only(), "all_gather_factory"_a = nb::none(),
        "The global group: this process alone when no backend starts, unless strict.");
  auto kw = nb::kw_only();
  using Collective = array (*)(const array&, std::optional<Group>, StreamOrDevice);
  auto collective = [&](const char* name, Collective f, const char* doc) {
    m.def(name, [f](nb::handle x, std::optional<Group> group, StreamArg s) {
      return f(to_array(x), group, s);
    }, "x"_a, kw, "group"_a = nb::none(), "stream"_a = nb::none(), doc);
  };
  collective("all_sum", &distributed::all_sum, "Sum of x over the processes of the group.");
  collective("all_max", &distributed::all_max, "Maximum of x over the processes of the group.");
  collective("all_min", &distributed::all_min, "Minimum of x over the processes of the group.");
  collective("all_gather", &distributed::all_gather,
             "Every process's x concatenated along axis 0.");
  collective("sum_scatter", &distributed::sum_scatter,
             "The sum over the processes, of which this rank keeps its chunk of axis 0.");
  def_named(m, "send", [](nb::handle x, int dst, std::optional<Group> group, StreamArg s) {
    return distributed::send(to_array(x), dst, group, s);
  }, "x"_a, "dst"_a, kw, "group"_a = nb::none(), "stream"_a = nb::none(),
        "Sends x to rank dst; returns x, whose evaluation performs the send.");
  def_named(m, "recv", [](nb::handle shape, Dtype dtype, int src, std::optional<Group> group,
                   StreamArg s) {
    return distributed::recv(to_shape(shape, "distributed.recv"), dtype, src, group, s);
  }, "shape"_a, "dtype"_a, "src"_a, kw, "group"_a = nb::none(), "stream"_a = nb::none(),
        "The array of that shape and dtype that rank src sends.");
  def_named(m, "recv_like", [](nb::handle x, int src, std::optional<Group> group, StreamArg s) {
    return distributed::recv_like(to_array(x), src, group, s);
  }, "x"_a, "src"_a, kw, "group"_a = nb::none(), "stream"_a = nb::none(),
        "recv(x.shape, x.dtype, src).");
}

}  // namespace tessera::python
