#include "cli/connect_flags.h"

#include <charconv>

namespace kvfold::cli {

void AddConnectFlags(CLI::App* cmd, ConnectOptions* o, bool server_required) {
  // Each may come from the environment instead (a flag wins): secrets need
  // not appear in a process listing.
  auto* server = cmd->add_option("--server", o->url, "NATS server URL(s), comma separated")
                     ->envname("KVFOLD_SERVER");
  if (server_required) server->required();
  cmd->add_option("--creds", o->creds_file, "NATS credentials file")
      ->envname("KVFOLD_CREDS")
      ->check(CLI::ExistingFile);
  cmd->add_option("--user", o->user, "user name (with --password)")->envname("KVFOLD_USER");
  cmd->add_option("--password", o->password, "password (with --user)")
      ->envname("KVFOLD_PASSWORD");
  cmd->add_option("--token", o->token, "authentication token")->envname("KVFOLD_TOKEN");
  cmd->add_option("--tls-ca", o->tls_ca_file, "CA bundle to trust")
      ->envname("KVFOLD_TLS_CA")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-cert", o->tls_cert_file, "client certificate")
      ->envname("KVFOLD_TLS_CERT")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", o->tls_key_file, "client key")
      ->envname("KVFOLD_TLS_KEY")
      ->check(CLI::ExistingFile);
}

Status CheckConnectFlags(const ConnectOptions& o) {
  if (o.user.empty() != o.password.empty()) {
    return Status::InvalidArgument("--user and --password go together");
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key go together");
  }
  return Status::OK();
}

const CLI::Validator kArtifactLocation(
    [](std::string& text) -> std::string {
      if ((text.starts_with("dir:") || text.starts_with("obj:")) && text.size() > 4) return "";
      return "artifact location \"" + text + "\" is neither dir:PATH nor obj:BUCKET";
    },
    "dir:PATH|obj:BUCKET");

StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& text, bool allow_zero) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  const std::string unit(ptr, text.data() + text.size());
  const auto bad = Status::InvalidArgument("duration \"" + text +
                                           "\" is not a number followed by ms, s, m or h");
  if (ec != std::errc() && ec != std::errc::result_out_of_range) return bad;
  if (ptr == text.data() || (ec == std::errc() && n == 0 && !allow_zero)) return bad;
  uint64_t ms_per_unit = 0;
  if (unit == "ms") ms_per_unit = 1;
  if (unit == "s") ms_per_unit = 1000;
  if (unit == "m") ms_per_unit = 60 * 1000;
  if (unit == "h") ms_per_unit = 3600 * 1000;
  if (ms_per_unit == 0) return bad;
  // Beyond this a sleep deadline could overflow the clock (a negative sleep
  // is a tight loop); no schedule needs more.
  constexpr uint64_t kMaxMs = uint64_t{10} * 366 * 24 * 3600 * 1000;  // ~10 years
  if (ec == std::errc::result_out_of_range || n > kMaxMs / ms_per_unit) {
    return Status::InvalidArgument("duration \"" + text + "\" is out of range (at most 10 years)");
  }
  return std::chrono::milliseconds(n * ms_per_unit);
}

}  // namespace kvfold::cli
