// The NATS connection flags every networked subcommand shares.

#ifndef KVFOLD_CLI_CONNECT_FLAGS_H_
#define KVFOLD_CLI_CONNECT_FLAGS_H_

#include <CLI/CLI.hpp>

#include "kvfold/connection.h"

namespace kvfold::cli {

// --server (required when `server_required`), --creds, --user, --password,
// --token, --tls-ca, --tls-cert, --tls-key.
void AddConnectFlags(CLI::App* cmd, ConnectOptions* options, bool server_required);

// InvalidArgument for combinations the flags cannot express alone.
Status CheckConnectFlags(const ConnectOptions& options);

// Refuses at parse time (exit 2) an artifact location that is neither
// dir:PATH nor obj:BUCKET.
extern const CLI::Validator kArtifactLocation;

// "30s", "5m", "1h", "250ms" -> milliseconds; InvalidArgument otherwise,
// also for zero (unless `allow_zero`) and for more than about 10 years.
StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text,
                                                  bool allow_zero = false);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_CONNECT_FLAGS_H_
