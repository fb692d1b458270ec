// The tensor runtime on the CPU: factories of undefined, empty and scalar tensors, queries,
// storage (alignment, storage sources, sharing between copies and threads), typed data access
// and views of caller memory (from_blob). Fills, random factories, copies and element access:
// test_tensor_data.cpp.
#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "tileops/core.h"
#include "tileops/core/storage_source.h"
#include "unit/core_test_helpers.h"

namespace {

using ::testing::HasSubstr;
using tileops::Device;
using tileops::DType;
using tileops::Sizes;
using tileops::Tensor;
using tileops::testing_helpers::error_message;
using SigErr = tileops::SignatureError;

constexpr DType kAllDTypes[] = {DType::float32,       DType::float16, DType::bfloat16,
                                DType::float8_e4m3fn, DType::int8,    DType::int16,
                                DType::int32,         DType::int64,   DType::uint8,
                                DType::bool_,         DType::float64, DType::float8_e5m2};

TEST(TensorBasics, Float64KeepsADoubleExactly) {
  // 1 + 2^-40 is not a float: float64 storage, element access and conversions keep it.
  const double v = 1.0 + 0x1p-40;
  Tensor t = Tensor::full({3}, v, DType::float64);
  EXPECT_EQ(t.item_at({1}), v);
  EXPECT_EQ(t.data<double>()[2], v);
  t.set_at({0}, -v);
  EXPECT_EQ(t.to_vector()[0], -v);
  EXPECT_EQ(t.to(DType::float64).item_at({0}), -v);
  EXPECT_EQ(t.to(DType::float32).item_at({1}), 1.0);  // rounded once to float
  EXPECT_EQ(Tensor::full({1}, 0.1, DType::float32).to(DType::float64).item_at({0}),
            static_cast<double>(0.1f));
  EXPECT_EQ(Tensor::arange(4, DType::int64).to(DType::float64).item_at({3}), 3.0);
  EXPECT_THROW((void)t.data<float>(), SigErr);
}

TEST(TensorBasics, UndefinedTensor) {
  const Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.str(), "Tensor(undefined)");
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.sizes(); }), HasSubstr("Tensor.sizes"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.numel(); }), HasSubstr("undefined"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.data_ptr(); }), HasSubstr("Tensor.data_ptr"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.view({1}); }), HasSubstr("Tensor.view"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.clone(); }), HasSubstr("Tensor.clone"));
  EXPECT_FALSE(t.shares_storage_with(t));
  Tensor dst = Tensor::zeros({2}, DType::float32);
  EXPECT_THAT(error_message<SigErr>([&] { dst.copy_(t); }),
              HasSubstr("source tensor is undefined"));
}

TEST(TensorBasics, EmptyQueries) {
  const Tensor t = Tensor::empty({2, 3, 4}, DType::bfloat16);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.sizes(), (Sizes{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Sizes{12, 4, 1}));
  EXPECT_EQ(t.offset(), 0);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(-3), 12);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.dtype(), DType::bfloat16);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.str(), "Tensor[2, 3, 4] bfloat16 cpu");
  ASSERT_NE(t.storage(), nullptr);
  EXPECT_GE(t.storage()->nbytes(), 48u);
  EXPECT_TRUE(t.storage()->owns_memory());
  EXPECT_EQ(t.data_ptr(), t.storage()->data());
  EXPECT_EQ(tileops::describe_sizes({2, 3}), "[2, 3]");
  EXPECT_EQ(tileops::describe_sizes({}), "[]");
}

TEST(TensorBasics, ScalarAndEmptyShapes) {
  const Tensor s = Tensor::full({}, 2.5, DType::float32);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), 2.5);
  EXPECT_EQ(s.item_at({}), 2.5);
  EXPECT_EQ(s.str(), "Tensor[] float32 cpu");
  const Tensor e = Tensor::empty({3, 0, 2}, DType::float32);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_EQ(e.strides(), (Sizes{2, 2, 1}));
  EXPECT_EQ(e.data_ptr(), nullptr);
  EXPECT_TRUE(e.to_vector().empty());
  EXPECT_NO_THROW(Tensor::zeros({0}, DType::int64).fill_(3));
}

TEST(TensorBasics, SizeAndStrideErrors) {
  const Tensor t = Tensor::empty({2, 3}, DType::float32);
  const std::string m = error_message<SigErr>([&] { (void)t.size(2); });
  EXPECT_THAT(m, HasSubstr("Tensor.size: dimension 2 is out of range for a 2-d tensor"));
  EXPECT_THAT(m, HasSubstr("[2, 3]"));
  EXPECT_THAT(m, HasSubstr("expected -2..1"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.stride(-3); }), HasSubstr("dimension -3"));
  const Tensor s = Tensor::empty({}, DType::float32);
  EXPECT_THAT(error_message<SigErr>([&] { (void)s.size(0); }), HasSubstr("no dimensions"));
}

TEST(TensorBasics, EmptyRejectsBadSizes) {
  EXPECT_THAT(error_message<SigErr>([] {
                Tensor::empty({2, -1}, DType::float32);
              }),
              HasSubstr("Tensor.empty: negative size -1 in [2, -1]"));
  EXPECT_THAT(error_message<SigErr>([] {
                Tensor::empty({int64_t{1} << 40, int64_t{1} << 40}, DType::float32);
              }),
              HasSubstr("overflows"));
}

TEST(TensorBasics, CpuAllocationsAre64ByteAligned) {
  for (const DType dtype : kAllDTypes) {
    for (const int64_t n : {1, 3, 7, 64, 1000, 100003}) {
      const Tensor t = Tensor::empty({n}, dtype);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64, 0u)
          << tileops::dtype_name(dtype) << " " << n;
    }
  }
  const auto storage = tileops::Storage::allocate(5, Device::cpu());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(storage->data()) % 64, 0u);
  EXPECT_EQ(storage->nbytes(), 5u);
  EXPECT_EQ(tileops::Storage::allocate(0, Device::cpu())->data(), nullptr);
}

struct SeenRequest {
  std::size_t nbytes = 0;
  std::optional<DType> dtype;
  Sizes sizes;
};

tileops::StoragePtr record_request(const tileops::StorageRequest& request, void* context) {
  auto* seen = static_cast<std::vector<SeenRequest>*>(context);
  seen->push_back(
      {request.nbytes, request.dtype, Sizes(request.sizes.begin(), request.sizes.end())});
  void* data = std::malloc(request.nbytes + 1);
  return tileops::Storage::borrow(data, request.nbytes, request.device,
                                  [data] { std::free(data); });
}

TEST(TensorBasics, AStorageSourceSeesATensorsTypeAndShape) {
  std::vector<SeenRequest> seen;
  {
    const tileops::ScopedStorageSource source(&record_request, &seen);
    const Tensor t = Tensor::empty({2, 3}, DType::bfloat16);
    EXPECT_EQ(t.sizes(), (Sizes{2, 3}));
    (void)tileops::Storage::allocate(5, Device::cpu());
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].nbytes, 12u);
  EXPECT_EQ(seen[0].dtype, DType::bfloat16);
  EXPECT_EQ(seen[0].sizes, (Sizes{2, 3}));
  EXPECT_EQ(seen[1].nbytes, 5u);  // raw bytes: no type, no shape
  EXPECT_FALSE(seen[1].dtype.has_value());
  EXPECT_TRUE(seen[1].sizes.empty());
  (void)Tensor::empty({4}, DType::int32);  // the scope ended: tileops' own allocator again
  EXPECT_EQ(seen.size(), 2u);
}

TEST(TensorBasics, CopiesShareStorageCheaply) {
  const Tensor a = Tensor::zeros({4}, DType::int32);
  Tensor b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(b.shares_storage_with(a));
  EXPECT_EQ(b.data_ptr(), a.data_ptr());
  b.fill_(7);
  EXPECT_EQ(a.item_at({2}), 7.0);
  const Tensor c = Tensor::zeros({4}, DType::int32);
  EXPECT_FALSE(c.shares_storage_with(a));
}

TEST(TensorBasics, TypedDataAccess) {
  const Tensor f = Tensor::zeros({2}, DType::float32);
  EXPECT_EQ(f.data<float>(), f.data_ptr());
  EXPECT_EQ(f.data<const float>(), f.data_ptr());
  EXPECT_EQ(f.data<std::byte>(), f.data_ptr());
  const Tensor b = Tensor::zeros({2}, DType::bfloat16);
  EXPECT_NE(b.data<tileops::BFloat16>(), nullptr);
  EXPECT_NE(b.data<std::uint16_t>(), nullptr);
  const Tensor q = Tensor::zeros({2}, DType::float8_e4m3fn);
  EXPECT_NE(q.data<tileops::Float8E4M3FN>(), nullptr);
  EXPECT_NE(q.data<std::uint8_t>(), nullptr);
  const Tensor q5 = Tensor::zeros({2}, DType::float8_e5m2);
  EXPECT_NE(q5.data<tileops::Float8E5M2>(), nullptr);
  EXPECT_NE(q5.data<std::uint8_t>(), nullptr);
  EXPECT_THAT(error_message<SigErr>([&] { (void)q5.data<tileops::Float8E4M3FN>(); }),
              HasSubstr("float8_e5m2"));
  EXPECT_NE(Tensor::zeros({2}, DType::bool_).data<bool>(), nullptr);
  EXPECT_NE(Tensor::zeros({2}, DType::int64).data<int64_t>(), nullptr);
  const std::string m = error_message<SigErr>([&] { (void)b.data<float>(); });
  EXPECT_THAT(m, HasSubstr("cannot access a bfloat16 tensor as float"));
  EXPECT_THAT(m, HasSubstr("tileops::BFloat16"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)f.data<std::int32_t>(); }),
              HasSubstr("float32 tensor as int32_t"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)f.data<std::uint16_t>(); }),
              HasSubstr("as uint16_t"));
}

TEST(TensorBasics, ThreadsShareAndHandOverTensors) {
  // Views and copies of one tensor from several threads; tensors created on one thread die on
  // another (their metadata returns to the other thread's pool); the memory is released once.
  std::vector<float> buffer(64, 1.0f);
  std::atomic<int> released{0};
  {
    const Tensor shared = Tensor::from_blob(buffer.data(), {8, 8}, DType::float32, Device::cpu(),
                                            {}, [&] { ++released; });
    std::vector<Tensor> handed(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        double sum = 0;
        for (int i = 0; i < 2000; ++i) {
          const Tensor v = shared.transpose(0, 1).select(0, i % 8).view({2, 4});
          sum += v.item_at({1, 3});
          Tensor owned = Tensor::empty({3, 5}, DType::int32);
          owned.fill_(i);
          if (i == 1999) handed[static_cast<std::size_t>(t)] = owned;
        }
        EXPECT_EQ(sum, 2000.0);
      });
    }
    for (auto& th : threads) th.join();
    for (const Tensor& h : handed) EXPECT_EQ(h.item_at({2, 4}), 1999.0);
  }
  EXPECT_EQ(released.load(), 1);
}

// ---------------------------------------------------------------------------------------------
// from_blob

TEST(FromBlob, ViewsCallerMemoryAndReleasesOnce) {
  std::vector<float> buffer(6);
  std::iota(buffer.begin(), buffer.end(), 0.0f);
  int released = 0;
  Tensor view;
  {
    Tensor t = Tensor::from_blob(buffer.data(), {2, 3}, DType::float32, Device::cpu(), {},
                                 [&] { ++released; });
    EXPECT_EQ(t.data_ptr(), buffer.data());
    EXPECT_EQ(t.strides(), (Sizes{3, 1}));
    EXPECT_FALSE(t.storage()->owns_memory());
    EXPECT_EQ(t.item_at({1, 2}), 5.0);
    view = t.transpose(0, 1);
    Tensor copy = t;
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 0);  // the view keeps the memory
  EXPECT_EQ(view.item_at({2, 1}), 5.0);
  view.set_at({0, 1}, 42.0);
  EXPECT_EQ(buffer[3], 42.0f);
  view = Tensor();
  EXPECT_EQ(released, 1);
}

TEST(FromBlob, StridedBlob) {
  std::vector<std::int32_t> buffer(20);
  std::iota(buffer.begin(), buffer.end(), 0);
  // Every other column of a 4x5 row-major matrix: sizes [4, 3], strides [5, 2].
  const Tensor t = Tensor::from_blob(buffer.data(), {4, 3}, DType::int32, Device::cpu(), {5, 2});
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.storage()->nbytes(), (3 * 5 + 2 * 2 + 1) * 4u);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(t.item_at({i, j}), static_cast<double>(5 * i + 2 * j));
  }
}

TEST(FromBlob, ErrorsStillReleaseOnce) {
  int released = 0;
  float x = 0;
  EXPECT_THAT(
      error_message<SigErr>([&] {
        Tensor::from_blob(&x, {2, 3}, DType::float32, Device::cpu(), {1}, [&] { ++released; });
      }),
      HasSubstr("Tensor.from_blob: strides [1] have 1 entries but sizes [2, 3] have 2"));
  EXPECT_EQ(released, 1);
  EXPECT_THAT(error_message<SigErr>([&] {
                Tensor::from_blob(&x, {2}, DType::float32, Device::cpu(), {-1},
                                  [&] { ++released; });
              }),
              HasSubstr("negative stride -1"));
  EXPECT_EQ(released, 2);
  EXPECT_THAT(error_message<SigErr>([&] {
                Tensor::from_blob(nullptr, {2}, DType::float32, Device::cpu(), {},
                                  [&] { ++released; });
              }),
              HasSubstr("data is null"));
  EXPECT_EQ(released, 3);
  EXPECT_THAT(error_message<SigErr>([&] {
                Tensor::from_blob(&x, {-2}, DType::float32, Device::cpu(), {}, [&] { ++released; });
              }),
              HasSubstr("negative size -2"));
  EXPECT_EQ(released, 4);
  // Empty tensors may have a null pointer.
  EXPECT_NO_THROW(Tensor::from_blob(nullptr, {0, 4}, DType::float32));
}

TEST(FromBlob, ReleaseCallbackExceptionsAreSwallowed) {
  float x = 1;
  int released = 0;
  {
    const Tensor t = Tensor::from_blob(&x, {1}, DType::float32, Device::cpu(), {}, [&] {
      ++released;
      throw std::runtime_error("ignored");
    });
  }
  EXPECT_EQ(released, 1);
}

// ---------------------------------------------------------------------------------------------
// Factories and fill

}  // namespace
