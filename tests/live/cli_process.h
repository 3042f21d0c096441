// Running the built kvfold binary as a child process, for CLI tests.

#ifndef KVFOLD_TESTS_LIVE_CLI_PROCESS_H_
#define KVFOLD_TESTS_LIVE_CLI_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "test_dir.h"  // ReadWholeFile

namespace kvfold::live {

struct CliExit {
  int code = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};

// Starts `kvfold args...` with stdout and stderr sent to the files given,
// and `env` ("NAME=value" each) added to the test process's environment.
pid_t SpawnCli(const std::vector<std::string>& args, const std::string& out_path,
               const std::string& err_path, const std::vector<std::string>& env = {});
// Waits for `pid`; its exit status, or 128 + the signal that ended it.
int WaitExit(pid_t pid);
// Runs `kvfold args...` to the end; `scratch` is a directory for its output.
CliExit RunCli(const std::vector<std::string>& args, const std::string& scratch,
               const std::vector<std::string>& env = {});

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_CLI_PROCESS_H_
