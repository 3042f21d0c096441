// A test binary killed by a signal says in which test and where. ctest only
// says "SegFault", and a CI page may keep just the two ends of a long log;
// scripts/test.sh repeats these lines at the end of a failed tier.

#include <execinfo.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

// The sanitizers report a crash themselves, with a better stack.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

void ReportAndDie(int sig) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  char line[512];
  const int n = std::snprintf(line, sizeof line, "\n*** signal %d (%s) in test %s.%s; stack:\n",
                              sig, strsignal(sig), test ? test->test_suite_name() : "(none)",
                              test ? test->name() : "(none)");
  if (n > 0) (void)!write(STDERR_FILENO, line, std::min<size_t>(n, sizeof line - 1));
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  // SA_RESETHAND restored the default action: die of the same signal, so
  // ctest and a core dump see what they would have without this handler.
  raise(sig);
}

bool Install() {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc now, not inside the handler
  struct sigaction action = {};
  action.sa_handler = ReportAndDie;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &action, nullptr);
  return true;
}

const bool installed = Install();

#endif

}  // namespace
