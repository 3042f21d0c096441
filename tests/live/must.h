// Must: a fixture helper's way to fail a test on an error it cannot
// ASSERT (a helper that returns a value): gtest fails the test with the
// exception's message and goes on to the next test, where a null source or
// an empty StatusOr dereferenced later would kill the whole test binary.

#ifndef KVFOLD_TESTS_LIVE_MUST_H_
#define KVFOLD_TESTS_LIVE_MUST_H_

#include <stdexcept>
#include <string>
#include <utility>

#include "kvfold/status.h"

namespace kvfold::live {

template <typename T>
T Must(StatusOr<T> result, const std::string& what) {
  if (!result.ok()) throw std::runtime_error(what + ": " + result.status().ToString());
  return std::move(result).value();
}

}  // namespace kvfold::live

#endif  // KVFOLD_TESTS_LIVE_MUST_H_
