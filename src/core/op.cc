#include "kvfold/bucket.h"

namespace kvfold {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kPut: return "put";
    case Op::kDelete: return "delete";
    case Op::kPurge: return "purge";
  }
  return "unknown";
}

}  // namespace kvfold
