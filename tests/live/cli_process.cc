#include "live/cli_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kvfold::live {

extern "C" char** environ;

pid_t SpawnCli(const std::vector<std::string>& args, const std::string& out_path,
               const std::string& err_path, const std::vector<std::string>& env) {
  // Everything the child needs is built before fork: the test process has
  // other threads (nats.c), and a child that allocates could deadlock on a
  // lock one of them held. After fork only async-signal-safe calls.
  // KVFOLD_CLI: another kvfold binary (a long run on a copy, say).
  static const std::string cli = [] {
    const char* v = std::getenv("KVFOLD_CLI");
    return std::string(v != nullptr && *v != '\0' ? v : KVFOLD_CLI_PATH);
  }();
  std::vector<char*> argv{const_cast<char*>(cli.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The child's environment: ours, each name `env` sets replaced by it.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool replaced = false;
    for (const auto& mine : env) {
      const size_t eq = mine.find('=');
      if (entry.substr(0, eq + 1) == std::string_view(mine).substr(0, eq + 1)) replaced = true;
    }
    if (!replaced) envp.push_back(*e);
  }
  for (const auto& mine : env) envp.push_back(const_cast<char*>(mine.c_str()));
  envp.push_back(nullptr);
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // A test process that dies never leaves a mirror running.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    dup2(out, 1);
    dup2(err, 2);
    execve(cli.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(out);
  close(err);
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CliExit RunCli(const std::vector<std::string>& args, const std::string& scratch,
               const std::vector<std::string>& env) {
  const std::string out = scratch + "/cli.out", err = scratch + "/cli.err";
  CliExit e;
  e.code = WaitExit(SpawnCli(args, out, err, env));
  e.out = ReadWholeFile(out);
  e.err = ReadWholeFile(err);
  return e;
}

}  // namespace kvfold::live
