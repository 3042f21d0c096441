// The NATS connection flags every networked subcommand shares.

#ifndef KVFOLD_CLI_CONNECT_FLAGS_H_
#define KVFOLD_CLI_CONNECT_FLAGS_H_

#include <CLI/CLI.hpp>
#include <span>

#include "kvfold/connection.h"
#include "kvfold/transport.h"

namespace kvfold::cli {

// --server, --creds, --user, --password, --token, --tls-ca, --tls-cert,
// --tls-key, --request-timeout.
void AddConnectFlags(CLI::App* cmd, ConnectOptions* options);

// Run by the subcommand that was given, after parsing: fills what no flag
// gave from KVFOLD_SERVER, KVFOLD_CREDS, ... (a flag wins), then checks
// and sets ConnectOptions::timeout from --request-timeout.
// InvalidArgument for a missing --server (when `server_required`), a file
// that does not exist, and pairs given half.
// (Not CLI11's envname: it fills the options of every subcommand, parsed or
// not, and sibling subcommands share one ConnectOptions.)
Status ResolveConnectFlags(ConnectOptions* options, bool server_required);

// How an s3:// location is reached: --s3-endpoint, --s3-region,
// --s3-addressing and --s3-profile (each left empty takes the AWS
// environment: AWS_ENDPOINT_URL, AWS_REGION, AWS_PROFILE, ...).
struct TransportFlags {
  std::string s3_endpoint;
  std::string s3_region;
  std::string s3_addressing = "auto";
  std::string s3_profile;
  bool s3_allow_unconditional_pointer = false;
  TransportOptions options;  // set by ResolveTransportFlags
};
void AddTransportFlags(CLI::App* cmd, TransportFlags* flags);
// InvalidArgument naming the flag at fault.
Status ResolveTransportFlags(TransportFlags* flags);

// Gives each flag not on the command line the value of its environment
// variable, when that is set and not empty, through the flag's own
// validators and conversion (a systemd unit's EnvironmentFile= sets them).
// InvalidArgument naming the variable when a value is refused.
struct EnvFlag {
  const char* flag;  // "--bucket"
  const char* env;   // "KVFOLD_BUCKET"
};
Status FillFlagsFromEnvironment(CLI::App* cmd, std::span<const EnvFlag> flags);

// Refuses at parse time (exit 2) an artifact location ValidateLocation
// refuses.
extern const CLI::Validator kArtifactLocation;

// Refuses at parse time (exit 2) a count that is not digits alone: CLI11
// reads "-1" into an unsigned flag as its largest value.
extern const CLI::Validator kCount;

// "30s", "5m", "1h", "250ms" -> milliseconds; InvalidArgument otherwise,
// also for zero (unless `allow_zero`) and for more than about 10 years.
StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text, bool allow_zero = false);

}  // namespace kvfold::cli

#endif  // KVFOLD_CLI_CONNECT_FLAGS_H_
