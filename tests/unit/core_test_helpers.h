// Small helpers shared by the core unit tests.
#pragma once

#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace tileops::testing_helpers {

/// Runs f, expecting it to throw exactly E (or a subclass); returns the message ("" and a test
/// failure otherwise).
template <class E, class F>
std::string error_message(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a different exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

}  // namespace tileops::testing_helpers
