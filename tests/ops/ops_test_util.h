// Helpers of the ops tests: reference comparison with per-dtype tolerances, error messages.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tileops/base/reference.h"
#include "tileops/core/tensor.h"

namespace tileops::testing_util {

/// Expects `got` to match `ref` within the tolerance of got's dtype.
inline void expect_close(const Tensor& got, const Tensor& ref, const std::string& what) {
  const double err = max_relative_error(got, ref);
  EXPECT_LE(err, tolerance_for(got.dtype())) << what << ": max relative error " << err;
}

/// Runs the registered reference of `op`.
inline std::vector<Tensor> run_reference(const char* op, const std::vector<Tensor>& inputs,
                                         const ParamMap& params) {
  const ReferenceFn* fn = find_reference(op);
  EXPECT_NE(fn, nullptr) << "no reference registered for " << op;
  return (*fn)(inputs, params);
}

/// A float32 CPU tensor of `sizes` holding `values` (each rounded to float32), row-major.
inline Tensor floats(const std::vector<double>& values, Sizes sizes) {
  Tensor t = Tensor::empty(std::move(sizes), DType::float32);
  for (std::size_t i = 0; i < values.size(); ++i) {
    t.data<float>()[i] = static_cast<float>(values[i]);
  }
  return t;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

}  // namespace tileops::testing_util
