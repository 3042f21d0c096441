#include "artifact/s3_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace kvfold::artifact {
namespace {

// Joins message parts. (GCC 12 at -O3 reports a false -Wrestrict on
// `"literal" + std::string`, GCC bug 105329.)
std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// An AWS INI file: section -> key -> value. A missing file is empty.
using Ini = std::map<std::string, std::map<std::string, std::string>>;
Ini ReadIni(const std::string& path) {
  Ini ini;
  std::ifstream in(path);
  std::string section;
  for (std::string line; std::getline(in, line);) {
    const std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = Trim(std::string_view(t).substr(1, t.size() - 2));
      continue;
    }
    const size_t eq = t.find('=');
    if (eq == std::string::npos) continue;
    ini[section][Trim(std::string_view(t).substr(0, eq))] =
        Trim(std::string_view(t).substr(eq + 1));
  }
  return ini;
}

std::string HomeFile(const char* env, const char* relative) {
  std::string path = Env(env);
  if (!path.empty()) return path;
  const std::string home = Env("HOME");
  return home.empty() ? std::string() : home + "/" + relative;
}

// S3's bucket naming rules, the part that keeps a URL well formed.
Status CheckBucketName(std::string_view bucket, std::string_view location) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(
        Cat({"S3 location \"", location, "\": bucket \"", bucket, "\" ", why}));
  };
  if (bucket.size() < 3 || bucket.size() > 63) return bad("must be 3 to 63 characters");
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      return bad("may hold only a-z, 0-9, '.' and '-'");
    }
  }
  if (bucket.front() == '.' || bucket.front() == '-' || bucket.back() == '.' ||
      bucket.back() == '-') {
    return bad("must begin and end with a letter or digit");
  }
  return Status::OK();
}

}  // namespace

StatusOr<S3Location> ParseS3Location(std::string_view location) {
  constexpr std::string_view kScheme = "s3://";
  if (!location.starts_with(kScheme)) {
    return Status::InvalidArgument(Cat({"\"", location, "\" is not s3://BUCKET/PREFIX"}));
  }
  std::string_view rest = location.substr(kScheme.size());
  const size_t slash = rest.find('/');
  S3Location out;
  out.bucket = std::string(rest.substr(0, slash));
  KVFOLD_RETURN_IF_ERROR(CheckBucketName(out.bucket, location));
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash + 1);
    while (prefix.ends_with('/')) prefix.remove_suffix(1);
    if (!prefix.empty()) {
      Status valid = ValidateObjectName(prefix);
      if (!valid.ok()) {
        return Status::InvalidArgument(
            Cat({"S3 location \"", location, "\": prefix: ", valid.message()}));
      }
      out.prefix = std::string(prefix) + "/";
    }
  }
  return out;
}

StatusOr<S3Config> ResolveS3Config(std::string_view location, const S3Options& options) {
  auto where = ParseS3Location(location);
  if (!where.ok()) return where.status();
  S3Config c;
  c.where = *where;
  if (options.part_size < (size_t{5} << 20)) {
    return Status::InvalidArgument(Cat(
        {"S3 part size ", std::to_string(options.part_size), " is below S3's minimum of 5 MiB"}));
  }
  if (options.max_attempts < 1) {
    return Status::InvalidArgument("S3 max_attempts must be at least 1");
  }
  c.part_size = options.part_size;
  c.max_attempts = options.max_attempts;

  const std::string profile = !options.profile.empty()
                                  ? options.profile
                                  : (Env("AWS_PROFILE").empty() ? "default" : Env("AWS_PROFILE"));
  // The config file names profiles "[profile NAME]", but the default "[default]".
  const Ini config = ReadIni(HomeFile("AWS_CONFIG_FILE", ".aws/config"));
  const std::string config_section = profile == "default" ? "default" : Cat({"profile ", profile});
  auto config_value = [&](const std::string& key) {
    auto s = config.find(config_section);
    if (s == config.end()) return std::string();
    auto v = s->second.find(key);
    return v == s->second.end() ? std::string() : v->second;
  };

  c.region = options.region;
  for (const std::string& r : {Env("AWS_REGION"), Env("AWS_DEFAULT_REGION"), config_value("region"),
                               std::string("us-east-1")}) {
    if (c.region.empty()) c.region = r;
  }

  std::string endpoint = options.endpoint;
  if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL");
  const bool on_aws = endpoint.empty();
  if (on_aws) endpoint = Cat({"https://s3.", c.region, ".amazonaws.com"});
  while (endpoint.ends_with('/')) endpoint.pop_back();
  if (!endpoint.starts_with("http://") && !endpoint.starts_with("https://")) {
    return Status::InvalidArgument(
        Cat({"S3 endpoint \"", endpoint, "\" is not an http:// or https:// URL"}));
  }
  if (endpoint.find('/', endpoint.find("//") + 2) != std::string::npos) {
    return Status::InvalidArgument(
        Cat({"S3 endpoint \"", endpoint, "\" has a path; give the server's base URL only"}));
  }
  c.endpoint = endpoint;
  switch (options.addressing) {
    case S3Options::Addressing::kPath:
      c.path_style = true;
      break;
    case S3Options::Addressing::kVirtualHosted:
      c.path_style = false;
      break;
    case S3Options::Addressing::kAuto:
      // A dotted bucket name breaks a TLS wildcard certificate as a host name.
      c.path_style = !on_aws || c.where.bucket.find('.') != std::string::npos;
      break;
  }

  c.access_key = Env("AWS_ACCESS_KEY_ID");
  c.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  c.session_token = Env("AWS_SESSION_TOKEN");
  std::string looked = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY";
  if (!options.profile.empty()) {
    // A profile named by the caller wins over the variables, and a typo in
    // it must not fall back to them (another account's keys).
    c.access_key.clear();
    c.secret_key.clear();
    c.session_token.clear();
    looked.clear();
  }
  if (c.access_key.empty() || c.secret_key.empty()) {
    const std::string file = HomeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    const Ini credentials = ReadIni(file);
    auto s = credentials.find(profile);
    looked += Cat({looked.empty() ? "" : ", ", "profile \"", profile, "\" of ",
                   file.empty() ? "~/.aws/credentials" : file});
    if (s != credentials.end()) {
      auto get = [&](const char* key) {
        auto v = s->second.find(key);
        return v == s->second.end() ? std::string() : v->second;
      };
      c.access_key = get("aws_access_key_id");
      c.secret_key = get("aws_secret_access_key");
      c.session_token = get("aws_session_token");
    }
  }
  if (c.access_key.empty() || c.secret_key.empty()) {
    return Status::FailedPrecondition(
        Cat({"no S3 credentials for ", location, ": looked in ", looked}));
  }
  if (c.access_key.find(':') != std::string::npos) {
    return Status::InvalidArgument("the S3 access key id holds a ':'");
  }
  return c;
}

std::string S3Url(const S3Config& c, std::string_view key, std::string_view query) {
  std::string url;
  if (c.path_style) {
    url = c.endpoint + "/" + c.where.bucket + "/";
  } else {
    const size_t host = c.endpoint.find("//") + 2;
    url = c.endpoint.substr(0, host) + c.where.bucket + "." + c.endpoint.substr(host) + "/";
  }
  url += key;
  if (!query.empty()) url.append("?").append(query);
  return url;
}

}  // namespace kvfold::artifact
