// DLPack export and import: round trips (also of non-contiguous views), ownership and deleters,
// dtype/device mapping and errors.
#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>

#include <vector>

#include "tileops/core.h"
#include "unit/core_test_helpers.h"

#if TILEOPS_WITH_DLPACK

#include <dlpack/dlpack.h>

// As src/core/dlpack.cpp decides: the float8 codes came with DLPack 1.1.
#if defined(DLPACK_MAJOR_VERSION) && \
    (DLPACK_MAJOR_VERSION > 1 || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 1))
#define TEST_DLPACK_HAS_FLOAT8 1
#else
#define TEST_DLPACK_HAS_FLOAT8 0
#endif

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tileops::Device;
using tileops::DType;
using tileops::Sizes;
using tileops::Tensor;
using tileops::testing_helpers::error_message;
using SigErr = tileops::SignatureError;

TEST(DLPack, ExportDescribesTheTensor) {
  const Tensor t = Tensor::arange(24, DType::bfloat16).view({2, 3, 4}).slice(2, 1, 3);
  DLManagedTensor* m = tileops::to_dlpack(t);
  ASSERT_NE(m, nullptr);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.data, t.data_ptr());
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.ndim, 3);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.device.device_id, 0);
  EXPECT_EQ(dl.dtype.code, kDLBfloat);
  EXPECT_EQ(dl.dtype.bits, 16);
  EXPECT_EQ(dl.dtype.lanes, 1);
  EXPECT_EQ(Sizes(dl.shape, dl.shape + 3), (Sizes{2, 3, 2}));
  EXPECT_EQ(Sizes(dl.strides, dl.strides + 3), (Sizes{12, 4, 1}));
  m->deleter(m);
}

TEST(DLPack, ExportKeepsStorageAlive) {
  int released = 0;
  std::vector<float> buffer{1, 2, 3, 4};
  DLManagedTensor* m = nullptr;
  {
    const Tensor t = Tensor::from_blob(buffer.data(), {4}, DType::float32, Device::cpu(), {},
                                       [&] { ++released; });
    m = tileops::to_dlpack(t);
  }
  EXPECT_EQ(released, 0);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[2], 3.0f);
  m->deleter(m);
  EXPECT_EQ(released, 1);
}

TEST(DLPack, RoundTrip) {
  for (const DType dtype : {DType::float64, DType::float32, DType::float16, DType::bfloat16,
                            DType::int8, DType::int16, DType::int32, DType::int64, DType::uint8}) {
    const Tensor t = Tensor::arange(6, dtype).view({2, 3});
    const Tensor back = tileops::from_dlpack(tileops::to_dlpack(t));
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_EQ(back.strides(), t.strides());
    EXPECT_EQ(back.data_ptr(), t.data_ptr());  // no copy
    EXPECT_THAT(back.to_vector(), ElementsAre(0, 1, 2, 3, 4, 5));
  }
}

TEST(DLPack, Float8E5M2RoundTrip) {
#if TEST_DLPACK_HAS_FLOAT8
  const Tensor t = Tensor::arange(6, DType::float32).view({2, 3}).to(DType::float8_e5m2);
  DLManagedTensor* m = tileops::to_dlpack(t);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLFloat8_e5m2);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 8);
  const Tensor back = tileops::from_dlpack(m);
  EXPECT_EQ(back.dtype(), DType::float8_e5m2);
  EXPECT_EQ(back.data_ptr(), t.data_ptr());
  EXPECT_THAT(back.to_vector(), ElementsAre(0, 1, 2, 3, 4, 5));
#else
  EXPECT_THAT(
      error_message<SigErr>([] { tileops::to_dlpack(Tensor::zeros({2}, DType::float8_e5m2)); }),
      HasSubstr("to_dlpack: dtype float8_e5m2 has no code in the dlpack.h"));
  GTEST_SKIP() << "the dlpack.h tileops is built with predates kDLFloat8_e5m2 (DLPack 1.1)";
#endif
}

TEST(DLPack, RoundTripOfANonContiguousView) {
  const Tensor base = Tensor::arange(24, DType::float32).view({2, 3, 4});
  const Tensor view = base.transpose(0, 2).slice(1, 1, 3);  // [4, 2, 2], strides [1, 4, 12]
  Tensor back = tileops::from_dlpack(tileops::to_dlpack(view));
  EXPECT_EQ(back.sizes(), (Sizes{4, 2, 2}));
  EXPECT_EQ(back.strides(), (Sizes{1, 4, 12}));
  EXPECT_EQ(back.data_ptr(), view.data_ptr());
  EXPECT_EQ(back.to_vector(), view.to_vector());
  back.set_at({3, 1, 1}, -1.0);  // writes reach the original storage
  EXPECT_EQ(base.item_at({1, 2, 3}), -1.0);
}

TEST(DLPack, ImportedDeleterRunsOnceWhenTheLastViewDies) {
  static int deleted = 0;
  deleted = 0;
  const Tensor t = Tensor::arange(6, DType::int32);
  DLManagedTensor* m = tileops::to_dlpack(t);
  // Wrap the producer's deleter to count calls.
  struct Counter {
    static void deleter(DLManagedTensor* self) {
      ++deleted;
      auto* inner = static_cast<DLManagedTensor*>(self->manager_ctx);
      inner->deleter(inner);
      delete self;
    }
  };
  auto* outer = new DLManagedTensor{m->dl_tensor, m, &Counter::deleter};
  Tensor view;
  {
    const Tensor imported = tileops::from_dlpack(outer);
    view = imported.slice(0, 2, 4);
  }
  EXPECT_EQ(deleted, 0);
  EXPECT_THAT(view.to_vector(), ElementsAre(2, 3));
  view = Tensor();
  EXPECT_EQ(deleted, 1);
}

TEST(DLPack, ImportWithoutStridesOrOffset) {
  std::vector<std::int64_t> data{0, 1, 2, 3, 4, 5, 6, 7};
  std::int64_t shape[2] = {2, 3};
  static bool deleted = false;
  deleted = false;
  DLManagedTensor m{};
  m.dl_tensor.data = data.data();
  m.dl_tensor.device = {kDLCPU, 0};
  m.dl_tensor.ndim = 2;
  m.dl_tensor.dtype = {kDLInt, 64, 1};
  m.dl_tensor.shape = shape;
  m.dl_tensor.strides = nullptr;  // contiguous
  m.dl_tensor.byte_offset = 2 * sizeof(std::int64_t);
  m.deleter = [](DLManagedTensor*) { deleted = true; };
  {
    const Tensor t = tileops::from_dlpack(&m);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.strides(), (Sizes{3, 1}));
    EXPECT_THAT(t.to_vector(), ElementsAre(2, 3, 4, 5, 6, 7));
  }
  EXPECT_TRUE(deleted);
}

DLManagedTensor* make_managed(DLDataType dtype, DLDevice device, bool* deleted) {
  static std::int64_t shape[1] = {2};
  static float storage[2] = {0, 0};
  auto* m = new DLManagedTensor{};
  m->dl_tensor.data = storage;
  m->dl_tensor.device = device;
  m->dl_tensor.ndim = 1;
  m->dl_tensor.dtype = dtype;
  m->dl_tensor.shape = shape;
  m->manager_ctx = deleted;
  m->deleter = [](DLManagedTensor* self) {
    *static_cast<bool*>(self->manager_ctx) = true;
    delete self;
  };
  return m;
}

TEST(DLPack, ImportErrorsTakeOwnership) {
  bool deleted = false;
  std::string m = error_message<SigErr>([&] {
    tileops::from_dlpack(make_managed({kDLComplex, 64, 1}, {kDLCPU, 0}, &deleted));
  });
  EXPECT_THAT(m, HasSubstr("from_dlpack: unsupported dtype (code 5, bits 64, lanes 1)"));
  EXPECT_TRUE(deleted);
  deleted = false;
  m = error_message<SigErr>([&] {
    tileops::from_dlpack(make_managed({kDLFloat, 32, 4}, {kDLCPU, 0}, &deleted));
  });
  EXPECT_THAT(m, HasSubstr("vector dtypes are not supported"));
  EXPECT_TRUE(deleted);
  deleted = false;
  m = error_message<SigErr>([&] {
    tileops::from_dlpack(make_managed({kDLFloat, 32, 1}, {kDLOpenCL, 0}, &deleted));
  });
  EXPECT_THAT(m, HasSubstr("from_dlpack: unsupported device (type 4, id 0)"));
  EXPECT_TRUE(deleted);
  EXPECT_THAT(error_message<SigErr>([] { tileops::from_dlpack(nullptr); }), HasSubstr("null"));
  // Pinned host memory imports as a CPU tensor.
  deleted = false;
  {
    const Tensor t =
        tileops::from_dlpack(make_managed({kDLFloat, 32, 1}, {kDLCUDAHost, 0}, &deleted));
    EXPECT_TRUE(t.device().is_cpu());
  }
  EXPECT_TRUE(deleted);
  // CUDA memory imports as a CUDA tensor (no runtime call is needed to wrap it).
  deleted = false;
  {
    const Tensor t = tileops::from_dlpack(make_managed({kDLFloat, 32, 1}, {kDLCUDA, 1}, &deleted));
    EXPECT_EQ(t.device(), Device::cuda(1));
  }
  EXPECT_TRUE(deleted);
}

TEST(DLPack, ExportErrors) {
  EXPECT_THAT(error_message<SigErr>([] { tileops::to_dlpack(Tensor()); }),
              HasSubstr("to_dlpack: the tensor is undefined"));
#if !defined(DLPACK_MAJOR_VERSION)
  // This dlpack.h predates kDLFloat8_e4m3fn.
  EXPECT_THAT(
      error_message<SigErr>([] { tileops::to_dlpack(Tensor::zeros({2}, DType::float8_e4m3fn)); }),
      HasSubstr("to_dlpack: dtype float8_e4m3fn has no code in the dlpack.h"));
#endif
#if !defined(DLPACK_MAJOR_VERSION) && DLPACK_VERSION < 80
  EXPECT_THAT(error_message<SigErr>([] { tileops::to_dlpack(Tensor::zeros({2}, DType::bool_)); }),
              HasSubstr("to_dlpack: dtype bool has no code"));
#else
  const Tensor b = tileops::from_dlpack(tileops::to_dlpack(Tensor::full({2}, 1, DType::bool_)));
  EXPECT_EQ(b.dtype(), DType::bool_);
#endif
}

}  // namespace

#endif  // TILEOPS_WITH_DLPACK
