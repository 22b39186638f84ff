#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <signal.h>

int main(int argc, char** argv) {
  // Tests kill Redis under open connections; a write to such a socket must
  // be an error, not the end of the test binary.
  signal(SIGPIPE, SIG_IGN);
  return doctest::Context(argc, argv).run();
}
