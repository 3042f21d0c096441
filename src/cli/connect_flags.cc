#include "cli/connect_flags.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "cli/logger.h"
#include "core/mutation.h"
#include "kvfold/transport.h"

namespace kvfold::cli {

namespace {

// True when a server URL list holds credentials ("nats://user:pass@host",
// "nats://token@host").
bool UrlHasCredentials(const std::string& urls) {
  size_t start = 0;
  while (start <= urls.size()) {
    const size_t comma = std::min(urls.find(',', start), urls.size());
    const std::string url = urls.substr(start, comma - start);
    const size_t scheme = url.find("://");
    const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
    const size_t at = url.find('@', host);
    if (at != std::string::npos && at < url.find('/', host)) return true;
    start = comma + 1;
  }
  return false;
}

// --request-timeout as given, per ConnectOptions (sibling subcommands share
// one): ConnectOptions holds the parsed duration only.
std::string& RequestTimeoutText(const ConnectOptions* o) {
  static std::map<const ConnectOptions*, std::string> texts;
  return texts[o];
}

}  // namespace

void AddConnectFlags(CLI::App* cmd, ConnectOptions* o) {
  o->url.clear();  // empty until a flag, the environment or the default fills it
  cmd->add_option("--server", o->url, "NATS server URL(s), comma separated [env KVFOLD_SERVER]");
  cmd->add_option("--creds", o->creds_file, "NATS credentials file [env KVFOLD_CREDS]");
  cmd->add_option("--user", o->user, "user name, with --password [env KVFOLD_USER]");
  cmd->add_option("--password", o->password,
                  "password, with --user; as a flag it shows in ps, so prefer the variable "
                  "[env KVFOLD_PASSWORD]");
  cmd->add_option("--token", o->token,
                  "authentication token; as a flag it shows in ps, so prefer the variable "
                  "[env KVFOLD_TOKEN]");
  cmd->add_option("--tls-ca", o->tls_ca_file, "CA bundle to trust [env KVFOLD_TLS_CA]");
  cmd->add_option("--tls-cert", o->tls_cert_file, "client certificate [env KVFOLD_TLS_CERT]");
  cmd->add_option("--tls-key", o->tls_key_file, "client key [env KVFOLD_TLS_KEY]");
  // nats-server 2.9 takes seconds to create a consumer on a stream of
  // millions of messages (8-14 s for 10M): past the timeout the watch
  // retries forever and never starts.
  cmd->add_option(
      "--request-timeout", RequestTimeoutText(o),
      "time allowed for connecting and for each JetStream API request, e.g. 30s (default 5s; "
      "raise it for buckets of millions of keys on nats-server 2.9, which takes seconds to "
      "create a consumer on them) [env KVFOLD_REQUEST_TIMEOUT]");
}

Status ResolveConnectFlags(ConnectOptions* o, bool server_required) {
  struct Field {
    std::string* value;
    const char* flag;
    const char* env;
    bool file;
  };
  // Secrets may come from the environment, out of the process listing: a
  // flag shows to every local user (ps, /proc/PID/cmdline), so say so.
  if (!o->password.empty() && !KVFOLD_MUTANT("cli-quiet-secret-flags")) {
    Log().Warn(
        "--password on the command line shows in the process listing to every local user; set "
        "KVFOLD_PASSWORD instead (in a systemd unit: its EnvironmentFile=, mode 0600), or use "
        "--creds FILE");
  }
  if (!o->token.empty() && !KVFOLD_MUTANT("cli-quiet-secret-flags")) {
    Log().Warn(
        "--token on the command line shows in the process listing to every local user; set "
        "KVFOLD_TOKEN instead (in a systemd unit: its EnvironmentFile=, mode 0600), or use "
        "--creds FILE");
  }
  if (UrlHasCredentials(o->url) && !KVFOLD_MUTANT("cli-quiet-secret-flags")) {
    Log().Warn(
        "--server holds credentials (user:password@ or token@ in a URL), which show in the "
        "process listing to every local user; set KVFOLD_SERVER instead, or give them in "
        "KVFOLD_USER and KVFOLD_PASSWORD, KVFOLD_TOKEN or a --creds FILE");
  }
  const Field fields[] = {
      {&o->url, "--server", "KVFOLD_SERVER", false},
      {&o->creds_file, "--creds", "KVFOLD_CREDS", true},
      {&o->user, "--user", "KVFOLD_USER", false},
      {&o->password, "--password", "KVFOLD_PASSWORD", false},
      {&o->token, "--token", "KVFOLD_TOKEN", false},
      {&o->tls_ca_file, "--tls-ca", "KVFOLD_TLS_CA", true},
      {&o->tls_cert_file, "--tls-cert", "KVFOLD_TLS_CERT", true},
      {&o->tls_key_file, "--tls-key", "KVFOLD_TLS_KEY", true},
  };
  for (const Field& f : fields) {
    std::string from = f.flag;
    if (f.value->empty()) {
      const char* env = std::getenv(f.env);
      if (env == nullptr || *env == '\0') continue;
      *f.value = env;
      from = std::string(f.env) + " (for " + f.flag + ")";
    }
    if (f.file && !std::filesystem::is_regular_file(*f.value)) {
      return Status::InvalidArgument(from + ": " + *f.value + " is not a file");
    }
  }
  std::string timeout = RequestTimeoutText(o);
  std::string timeout_from = "--request-timeout";
  if (const char* env = std::getenv("KVFOLD_REQUEST_TIMEOUT");
      timeout.empty() && env != nullptr && *env != '\0') {
    timeout = env;
    timeout_from = "KVFOLD_REQUEST_TIMEOUT (for --request-timeout)";
  }
  if (!timeout.empty()) {
    auto d = ParseDuration(timeout);
    if (!d.ok()) return d.status().WithContext(timeout_from);
    o->timeout = *d;
  }
  if (o->url.empty()) {
    if (server_required) return Status::InvalidArgument("--server (or KVFOLD_SERVER) is required");
    o->url = ConnectOptions().url;
  }
  if (o->user.empty() != o->password.empty()) {
    return Status::InvalidArgument("--user and --password go together");
  }
  if (o->tls_cert_file.empty() != o->tls_key_file.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key go together");
  }
  return Status::OK();
}

void AddTransportFlags(CLI::App* cmd, TransportFlags* f) {
  cmd->add_option("--s3-endpoint", f->s3_endpoint,
                  "S3 server base URL, e.g. http://127.0.0.1:9000 (default: AWS_ENDPOINT_URL_S3, "
                  "AWS_ENDPOINT_URL, else AWS)");
  cmd->add_option("--s3-region", f->s3_region,
                  "S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1)");
  cmd->add_option("--s3-addressing", f->s3_addressing,
                  "path (ENDPOINT/BUCKET/KEY), virtual (BUCKET.HOST/KEY) or auto (default: "
                  "virtual on AWS, path elsewhere)");
  cmd->add_option("--s3-profile", f->s3_profile,
                  "profile of the AWS credentials and config files (default: AWS_PROFILE, "
                  "else default)");
  cmd->add_flag("--s3-allow-unconditional-pointer", f->s3_allow_unconditional_pointer,
                "export to an S3 server that ignores conditional writes (s3rver), trusting the "
                "export lease alone to keep the latest pointer forward-only");
}

Status ResolveTransportFlags(TransportFlags* f) {
  auto addressing = ParseS3Addressing(f->s3_addressing);
  if (!addressing.ok()) return addressing.status().WithContext("--s3-addressing");
  f->options.s3.addressing = *addressing;
  f->options.s3.endpoint = f->s3_endpoint;
  f->options.s3.region = f->s3_region;
  f->options.s3.profile = f->s3_profile;
  f->options.s3.allow_unconditional_pointer = f->s3_allow_unconditional_pointer;
  return Status::OK();
}

Status FillFlagsFromEnvironment(CLI::App* cmd, std::span<const EnvFlag> flags) {
  for (const EnvFlag& f : flags) {
    if (cmd->count(f.flag) > 0) continue;
    const char* value = std::getenv(f.env);
    if (value == nullptr || *value == '\0') continue;
    CLI::Option* option = cmd->get_option(f.flag);
    try {
      option->add_result(std::string(value));
      option->run_callback();
    } catch (const CLI::Error& e) {
      return Status::InvalidArgument(std::string(f.env) + " (for " + f.flag + "): " + e.what());
    }
  }
  return Status::OK();
}

const CLI::Validator kArtifactLocation(
    [](std::string& text) -> std::string {
      Status valid = ValidateLocation(text);
      return valid.ok() ? std::string() : valid.message();
    },
    "LOCATION");

const CLI::Validator kCount(
    [](std::string& text) -> std::string {
      if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) return {};
      return "\"" + text + "\" is not a whole number (0 or more)";
    },
    "COUNT");

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
