// Everything an S3 request needs, resolved once when a transport opens:
// the location's bucket and prefix, the endpoint and addressing, the region
// and the credentials (S3Options first, then the standard AWS environment
// variables and files).

#ifndef KVFOLD_ARTIFACT_S3_CONFIG_H_
#define KVFOLD_ARTIFACT_S3_CONFIG_H_

#include <string>
#include <string_view>

#include "kvfold/status.h"
#include "kvfold/transport.h"

namespace kvfold::artifact {

struct S3Location {
  std::string bucket;
  std::string prefix;  // "" or "a/b/" (ends in '/')
};

// "s3://bucket[/prefix]" -> its parts; InvalidArgument naming the fault.
StatusOr<S3Location> ParseS3Location(std::string_view location);

struct S3Config {
  S3Location where;
  std::string endpoint;  // "https://s3.eu-west-1.amazonaws.com", no trailing '/'
  bool path_style = false;
  std::string region;
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // "" unless temporary credentials
  size_t part_size = 0;
  int max_attempts = 0;
};

// InvalidArgument for a bad location, option or endpoint; FailedPrecondition
// when no credentials are found anywhere (naming where it looked).
StatusOr<S3Config> ResolveS3Config(std::string_view location, const S3Options& options);

// The URL of `key` ("" for the bucket itself) with `query` ("a=1&b=2",
// already encoded and sorted, or "").
std::string S3Url(const S3Config& config, std::string_view key, std::string_view query = {});

}  // namespace kvfold::artifact

#endif  // KVFOLD_ARTIFACT_S3_CONFIG_H_
