#include "kvfold/change.h"

namespace kvfold {

std::string_view ChangeOriginName(ChangeOrigin origin) {
  switch (origin) {
    case ChangeOrigin::kLive:
      return "live";
    case ChangeOrigin::kRelist:
      return "relist";
    case ChangeOrigin::kRestore:
      return "restore";
    case ChangeOrigin::kReconcile:
      return "reconcile";
    case ChangeOrigin::kExpiry:
      return "expiry";
  }
  return "?";
}

}  // namespace kvfold
