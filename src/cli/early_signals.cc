#include "cli/early_signals.h"

#include <signal.h>

#include <csignal>

namespace reliableq::cli {

namespace {

volatile std::sig_atomic_t stop_requested = 0;
volatile std::sig_atomic_t quiet_requested = 0;

void OnSignal(int signal_number) {
  if (signal_number == SIGTERM || signal_number == SIGINT) stop_requested = 1;
  if (signal_number == SIGTSTP || signal_number == SIGUSR1) quiet_requested = 1;
}

}  // namespace

void InstallEarlySignals() {
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  // Restarted: a connect or read in progress is not cut short by a signal
  // that only sets a flag.
  action.sa_flags = SA_RESTART;
  action.sa_handler = OnSignal;
  for (int signal_number : {SIGTERM, SIGINT, SIGTSTP, SIGUSR1}) {
    sigaction(signal_number, &action, nullptr);
  }
  action.sa_handler = SIG_IGN;
  for (int signal_number : {SIGHUP, SIGUSR2, SIGTTIN}) sigaction(signal_number, &action, nullptr);
}

void ForwardEarlySignals(Server& server) {
  if (stop_requested) {
    server.Stop();
  } else if (quiet_requested) {
    server.Quiet();
  }
}

}  // namespace reliableq::cli
