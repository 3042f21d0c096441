// The kvfold subcommands. Each registers its flags on the app and returns
// the process exit code when run.

#ifndef KVFOLD_CLI_COMMANDS_H_
#define KVFOLD_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "kvfold/status.h"
#include "kvfold/transport.h"

namespace kvfold::cli {

// Exit codes: a contract scripts rely on.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCursorExpired = 3;
inline constexpr int kExitNotFound = 4;   // kvfold get: no such live key
inline constexpr int kExitDivergent = 5;  // kvfold audit: the fold differs from its bucket

// Prints "kvfold <command>: <status>" to stderr and maps it to an exit code.
int Report(const std::string& command, const Status& status);

// The latest artifact at `at`: its cursor, its anchor's age by this
// machine's clock and the marker window it is restorable in, as lines of
// text or one JSON object (`kvfold status --artifacts`).
StatusOr<std::string> LatestArtifactSummary(Transport& at, bool as_json);

using Runner = std::function<int()>;

Runner AddMirrorCommand(CLI::App& app);
Runner AddDumpCommand(CLI::App& app);
Runner AddStatusCommand(CLI::App& app);
Runner AddScanCommand(CLI::App& app);
Runner AddGetCommand(CLI::App& app);
Runner AddExportCommand(CLI::App& app);
Runner AddSeedCommand(CLI::App& app);
Runner AddArtifactsCommand(CLI::App& app);
Runner AddAuditCommand(CLI::App& app);

}  // namespace kvfold::cli

// Returns Report(command, status) from the enclosing function on error.
#define KVFOLD_RETURN_IF_ERROR_EXIT(command, expr)                                   \
  do {                                                                               \
    ::kvfold::Status kvfold_status_ = (expr);                                        \
    if (!kvfold_status_.ok()) return ::kvfold::cli::Report(command, kvfold_status_); \
  } while (0)

#endif  // KVFOLD_CLI_COMMANDS_H_
