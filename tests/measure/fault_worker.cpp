// A measurement worker with faults injected by graph name, for the isolation
// tests: "crash" dies of SIGSEGV, "hang" never answers, "throw" throws,
// "wrong" perturbs one output element. Other graphs are measured normally.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

#include "measure/worker.h"

namespace {
bool Named(const fusetune::graph::Graph& g, const char* what) {
  return g.name.find(what) != std::string::npos;
}
}  // namespace

int main() {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  fusetune::measure::MeasureHooks hooks;
  hooks.before_run = [](const fusetune::graph::Graph& g) {
    if (Named(g, "crash")) {
      signal(SIGSEGV, SIG_DFL);  // past a sanitizer's handler: die of the signal
      raise(SIGSEGV);
    }
    if (Named(g, "hang"))
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (Named(g, "throw")) throw std::runtime_error("injected fault");
  };
  hooks.on_outputs = [](const fusetune::graph::Graph& g, fusetune::graph::TensorMap& outputs) {
    if (!Named(g, "wrong")) return;
    fusetune::graph::Tensor& t = outputs.begin()->second;
    t.data<float>()[3] += 1.0f;
  };
  return fusetune::measure::RunWorker(3, hooks);
}
