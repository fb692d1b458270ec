// A CUDA graph captured once and replayed, for the GPU tests that check an op or a kernel under
// graph capture (the way serving engines run decode steps).
#pragma once

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "tileops/core/cuda.h"

namespace tileops::gpu_test {

/// A non-blocking stream and the graph captured on it: `capture(work)` records what `work`
/// launches, with the stream current for device 0 (ops launch there) and passed to `work` (for
/// kernels launched directly); `replay()` launches the graph and waits for it. Inputs a replay
/// reads must be written in order with the stream's work: a synchronous host-to-device
/// cudaMemcpy, or a copy on `stream()` (a plain device-to-device cudaMemcpy runs on the legacy
/// stream, which this stream does not wait for).
class CapturedGraph {
 public:
  CapturedGraph() {
    ok_ = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess;
  }
  ~CapturedGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  [[nodiscard]] cudaStream_t stream() const { return stream_; }

  /// Runs `work(stream)` once on the stream, outside a capture, and waits: what an op builds on
  /// its first call (its cache entry, kernel attributes) is built before the capture.
  template <class F>
  [[nodiscard]] testing::AssertionResult warm_up(F&& work) {
    if (!ok_) return testing::AssertionFailure() << "cudaStreamCreateWithFlags failed";
    {
      ScopedCudaStream on(0, stream_);
      work(stream_);
    }
    if (const cudaError_t rc = cudaStreamSynchronize(stream_); rc != cudaSuccess) {
      return testing::AssertionFailure() << "warm-up: " << cudaGetErrorString(rc);
    }
    return testing::AssertionSuccess();
  }

  /// Captures and instantiates what `work(stream)` launches; a failure names what failed (an
  /// exception from `work` ends the capture first).
  template <class F>
  [[nodiscard]] testing::AssertionResult capture(F&& work) {
    if (!ok_) return testing::AssertionFailure() << "cudaStreamCreateWithFlags failed";
    ScopedCudaStream on(0, stream_);
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      return testing::AssertionFailure() << "cudaStreamBeginCapture failed";
    }
    try {
      work(stream_);
    } catch (const std::exception& e) {
      cudaStreamEndCapture(stream_, &graph_);
      return testing::AssertionFailure() << "capture: " << e.what();
    }
    if (const cudaError_t rc = cudaStreamEndCapture(stream_, &graph_); rc != cudaSuccess) {
      return testing::AssertionFailure() << "cudaStreamEndCapture: " << cudaGetErrorString(rc);
    }
    if (const cudaError_t rc = cudaGraphInstantiate(&exec_, graph_, 0); rc != cudaSuccess) {
      return testing::AssertionFailure() << "cudaGraphInstantiate: " << cudaGetErrorString(rc);
    }
    return testing::AssertionSuccess();
  }

  /// Launches the captured graph on the stream and waits for it.
  [[nodiscard]] testing::AssertionResult replay() const {
    if (exec_ == nullptr) return testing::AssertionFailure() << "nothing captured";
    if (const cudaError_t rc = cudaGraphLaunch(exec_, stream_); rc != cudaSuccess) {
      return testing::AssertionFailure() << "cudaGraphLaunch: " << cudaGetErrorString(rc);
    }
    if (const cudaError_t rc = cudaStreamSynchronize(stream_); rc != cudaSuccess) {
      return testing::AssertionFailure() << "replay: " << cudaGetErrorString(rc);
    }
    return testing::AssertionSuccess();
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  bool ok_ = false;
};

}  // namespace tileops::gpu_test
#endif
