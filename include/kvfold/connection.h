// Connecting to NATS and opening a bucket as a BucketSource.

#ifndef KVFOLD_CONNECTION_H_
#define KVFOLD_CONNECTION_H_

#include <chrono>
#include <memory>
#include <string>

#include "kvfold/bucket.h"
#include "kvfold/status.h"

namespace kvfold {

struct ConnectOptions {
  // Server URL(s), comma separated. Default: nats://127.0.0.1:4222.
  std::string url = "nats://127.0.0.1:4222";
  // Credentials file (JWT + NKey seed). Default: none.
  std::string creds_file;
  // User and password. Default: none.
  std::string user;
  std::string password;
  // Token. Default: none.
  std::string token;
  // TLS: CA bundle to trust, and a client certificate and key. Setting any
  // of them requires TLS. Default: none.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Time allowed for the first connection and for each API request.
  // Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  // Connection name shown by the server. Default: "kvfold".
  std::string name = "kvfold";
};

// Connects and opens bucket `bucket` (stream KV_<bucket>). The connection
// reconnects forever; deliveries it opens report a reset after a reconnect.
// Fails with InvalidArgument for a bad bucket name or option, Unavailable
// when the server cannot be reached, NotFound when the bucket does not exist.
//
// The source always makes a connection of its own: it cannot take a
// natsConnection* a service holds. nats.c (3.4) copies natsOptions at
// natsConnection_Connect and has no setter on a live connection, so the
// callbacks the source sets there cannot be added: disconnected and
// reconnected (a delivery opened before either reports a reset) and the
// error handler (slow consumers; the first permission refusal). Polling
// the connection's reconnect count could stand in for the first two, but
// not the rest: a refusal of the service's own publish would end the watch
// as PermissionDenied (nats.c keeps one last error per connection), a
// service's reconnect limit would close the source for good, and moving
// off a failing server of a list reconnects with these ConnectOptions.
// Give it the options (servers, credentials, TLS) the service connects with.
StatusOr<std::unique_ptr<BucketSource>> OpenNatsBucket(const ConnectOptions& options,
                                                       const std::string& bucket);

// OK when `bucket` is a valid bucket name ([-_a-zA-Z0-9]+).
Status ValidateBucketName(const std::string& bucket);

}  // namespace kvfold

#endif  // KVFOLD_CONNECTION_H_
