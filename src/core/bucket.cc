#include "kvfold/bucket.h"

namespace kvfold {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kPut:
      return "put";
    case Op::kDelete:
      return "delete";
    case Op::kPurge:
      return "purge";
  }
  return "unknown";
}

std::string_view ResetCauseName(ResetCause cause) {
  switch (cause) {
    case ResetCause::kConsumerGap:
      return "consumer_gap";
    case ResetCause::kHeartbeatGap:
      return "heartbeat_gap";
    case ResetCause::kIdle:
      return "idle";
    case ResetCause::kConnection:
      return "connection";
    case ResetCause::kSlowConsumer:
      return "slow_consumer";
    case ResetCause::kServerStatus:
      return "server_status";
    case ResetCause::kRollupSkip:
      return "rollup_skip";
    case ResetCause::kOther:
      return "other";
  }
  return "other";
}

}  // namespace kvfold
