// The NATS connection flags every networked subcommand shares.

#ifndef KVFOLD_CLI_CONNECT_FLAGS_H_
#define KVFOLD_CLI_CONNECT_FLAGS_H_

#include <CLI/CLI.hpp>

#include "kvfold/connection.h"

namespace kvfold::cli {

// --server, --creds, --user, --password, --token, --tls-ca, --tls-cert,
// --tls-key.
void AddConnectFlags(CLI::App* cmd, ConnectOptions* options);

// Run by the subcommand that was given, after parsing: fills what no flag
// gave from KVFOLD_SERVER, KVFOLD_CREDS, ... (a flag wins), then checks.
// InvalidArgument for a missing --server (when `server_required`), a file
// that does not exist, and pairs given half.
// (Not CLI11's envname: it fills the options of every subcommand, parsed or
// not, and sibling subcommands share one ConnectOptions.)
Status ResolveConnectFlags(ConnectOptions* options, bool server_required);

// Refuses at parse time (exit 2) an artifact location that is neither
// dir:PATH nor obj:BUCKET.
extern const CLI::Validator kArtifactLocation;

// "30s", "5m", "1h", "250ms" -> milliseconds; InvalidArgument otherwise,
// also for zero (unless `allow_zero`) and for more than about 10 years.
StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text, bool allow_zero = false);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_CONNECT_FLAGS_H_
