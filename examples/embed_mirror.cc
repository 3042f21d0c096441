// Embedding kvfold: mirror the "config" keys of bucket "settings" into a
// fold, load an in-memory view from it, and keep the view current through
// the apply hook.
//   embed_mirror nats://127.0.0.1:4222 settings /var/lib/myapp/fold
#include <iostream>
#include <map>

#include "kvfold/kvfold.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: embed_mirror URL BUCKET FOLD_DIR\n";
    return 2;
  }
  kvfold::ConnectOptions connect;
  connect.url = argv[1];
  auto bucket = kvfold::OpenNatsBucket(connect, argv[2]);
  if (!bucket.ok()) return std::cerr << bucket.status().ToString() << "\n", 1;
  auto fold = kvfold::OpenRocksFold(argv[3]);
  if (!fold.ok()) return std::cerr << fold.status().ToString() << "\n", 1;

  // Your domain state, loaded from the fold first: a restart replays only
  // what changed since the cursor, so the hook alone never shows the rest.
  std::map<std::string, std::string> view;
  kvfold::Status loaded = (*fold)->Scan("config.", /*include_tombstones=*/false,
                                        [&view](std::string_view key, const kvfold::Entry& e) {
                                          view[std::string(key)] = e.value;
                                          return true;
                                        });
  if (!loaded.ok()) return std::cerr << loaded.ToString() << "\n", 1;
  kvfold::WatchOptions options;
  options.scope = *kvfold::Scope::Make({"config."});
  options.until_caught_up = true;  // drop this to follow forever
  options.apply = [&view](const kvfold::Change& c) {
    if (c.op == kvfold::Op::kPut)
      view[std::string(c.key)] = std::string(c.value);
    else
      view.erase(std::string(c.key));
    return kvfold::Status::OK();
  };
  kvfold::Status s = kvfold::Watch(**bucket, **fold, options);
  std::cout << "watch ended: " << s.ToString() << "; " << view.size() << " keys in the view\n";
  return s.ok() ? 0 : 1;
}
