// fusetune-worker: the process the measurer runs candidates in (worker.h).
// It is started by fusetune with its socket on fd 3, not by users.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>

#include "measure/worker.h"

int main() {
  // Dies with its parent; Ctrl-C at the terminal goes to the parent, which
  // finishes the current measurement before stopping.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGINT, SIG_IGN);
  if (fcntl(3, F_GETFD) < 0) {
    std::fprintf(stderr, "fusetune-worker is started by fusetune to run measurements\n");
    return 2;
  }
  return fusetune::measure::RunWorker(3);
}
