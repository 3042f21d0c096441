// Writes sample data to a KV bucket with plain nats.c, for the demo:
//   sample_writer URL BUCKET COUNT
// Creates the bucket when missing, puts COUNT keys under "config." and
// "users.", overwrites some and deletes every tenth.
#include <nats/nats.h>

#include <cstdio>
#include <cstdlib>
#include <string>

static int Fail(const char* what, natsStatus s) {
  std::fprintf(stderr, "sample_writer: %s: %s\n", what, natsStatus_GetText(s));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: sample_writer URL BUCKET COUNT\n");
    return 2;
  }
  const int count = std::atoi(argv[3]);
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  kvStore* kv = nullptr;
  natsStatus s = natsConnection_ConnectTo(&nc, argv[1]);
  if (s != NATS_OK) return Fail("connect", s);
  if ((s = natsConnection_JetStream(&js, nc, nullptr)) != NATS_OK) return Fail("jetstream", s);
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = argv[2];
  cfg.History = 5;
  if ((s = js_CreateKeyValue(&kv, js, &cfg)) != NATS_OK) return Fail("create bucket", s);
  for (int i = 0; i < count; ++i) {
    const std::string key = (i % 2 ? "users." : "config.") + std::to_string(i);
    const std::string value = "value-" + std::to_string(i);
    if ((s = kvStore_PutString(nullptr, kv, key.c_str(), value.c_str())) != NATS_OK) {
      return Fail("put", s);
    }
    if (i % 7 == 0) {
      kvStore_PutString(nullptr, kv, key.c_str(), (value + "-updated").c_str());
    }
    if (i % 10 == 9) kvStore_Delete(kv, key.c_str());
  }
  std::printf("sample_writer: wrote %d keys to bucket %s\n", count, argv[2]);
  kvStore_Destroy(kv);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return 0;
}
