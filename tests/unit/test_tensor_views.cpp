// Views: sizes, strides and offsets of every view op against hand-computed index math, storage
// sharing, and the errors of bad use.
#include <gmock/gmock-matchers.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tileops/core.h"
#include "unit/core_test_helpers.h"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tileops::DType;
using tileops::Sizes;
using tileops::Tensor;
using tileops::testing_helpers::error_message;
using SigErr = tileops::SignatureError;

// base[i] = i for a [2, 3, 4] tensor: element (a, b, c) is 12a + 4b + c.
Tensor base234() {
  return Tensor::arange(24, DType::float32).view({2, 3, 4});
}

// Visits every index of `sizes` in row-major order.
void for_each_index(const Sizes& sizes, const std::function<void(const Sizes&)>& f) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  Sizes index(sizes.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    f(index);
    for (std::size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

// Every element of `view` equals expected(index).
void expect_elements(const Tensor& view, const std::function<double(const Sizes&)>& expected) {
  for_each_index(view.sizes(), [&](const Sizes& index) {
    EXPECT_EQ(view.item_at(std::span<const int64_t>(index)), expected(index))
        << "at " << tileops::describe_sizes(index) << " of " << view.str();
  });
}

TEST(View, ContiguousViews) {
  const Tensor t = base234();
  const Tensor v = t.view({6, 4});
  EXPECT_EQ(v.sizes(), (Sizes{6, 4}));
  EXPECT_EQ(v.strides(), (Sizes{4, 1}));
  EXPECT_TRUE(v.shares_storage_with(t));
  EXPECT_EQ(v.data_ptr(), t.data_ptr());
  expect_elements(v, [](const Sizes& i) { return static_cast<double>(4 * i[0] + i[1]); });
  EXPECT_EQ(t.view({-1}).sizes(), (Sizes{24}));
  EXPECT_EQ(t.view({2, -1, 3}).sizes(), (Sizes{2, 4, 3}));
  EXPECT_EQ(t.view({1, 24, 1}).strides(), (Sizes{24, 1, 1}));
  EXPECT_EQ(Tensor::full({}, 3, DType::float32).view({1, 1}).item(), 3.0);
  EXPECT_EQ(Tensor::empty({0, 3}, DType::float32).view({3, 0, -1 + 2}).sizes(), (Sizes{3, 0, 1}));
}

TEST(View, NonContiguousButCompatible) {
  // [2, 3, 4] -> permute to [3, 4, 2]... not viewable as [12, 2]? dims 0,1 (sizes 3, 4, strides
  // 4, 1) are contiguous among themselves, so merging them works.
  const Tensor p = base234().permute({1, 2, 0});  // sizes [3, 4, 2], strides [4, 1, 12]
  EXPECT_EQ(p.strides(), (Sizes{4, 1, 12}));
  const Tensor v = p.view({12, 2});
  EXPECT_EQ(v.strides(), (Sizes{1, 12}));
  expect_elements(v, [](const Sizes& i) { return static_cast<double>(i[0] + 12 * i[1]); });
  // Splitting a dimension of a strided view.
  const Tensor s = base234().slice(2, 0, 4, 2);  // sizes [2, 3, 2], strides [12, 4, 2]
  const Tensor sv = s.view({6, 2});
  EXPECT_EQ(sv.strides(), (Sizes{4, 2}));
  expect_elements(sv, [](const Sizes& i) { return static_cast<double>(4 * i[0] + 2 * i[1]); });
  const Tensor split = s.view({2, 3, 2, 1});
  EXPECT_EQ(split.strides(), (Sizes{12, 4, 2, 2}));  // a size-1 dim's stride is free
}

TEST(View, Errors) {
  const Tensor t = Tensor::empty({2, 3}, DType::float32);
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.view({4, 2});
              }),
              HasSubstr("Tensor.view: cannot view sizes [2, 3] (6 elements) as [4, 2] "
                        "(8 elements)"));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.view({4, -1});
              }),
              HasSubstr("Tensor.view: cannot view sizes [2, 3] (6 elements) as [4, -1]: 6 is "
                        "not a multiple of 4"));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.view({-1, -1});
              }),
              HasSubstr("only one dimension can be -1, got [-1, -1]"));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.view({-2, -3});
              }),
              HasSubstr("invalid size -2 in [-2, -3]"));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)Tensor::empty({0, 2}, DType::float32).view({0, -1});
              }),
              HasSubstr("ambiguous"));
  const std::string m = error_message<SigErr>([&] { (void)t.transpose(0, 1).view({6}); });
  EXPECT_THAT(m, HasSubstr("Tensor.view: cannot view sizes [3, 2] with strides [1, 3] as [6]"));
  EXPECT_THAT(m, HasSubstr("use reshape"));
}

TEST(Reshape, ViewsWhenPossibleCopiesOtherwise) {
  const Tensor t = base234();
  const Tensor r = t.reshape({4, 6});
  EXPECT_TRUE(r.shares_storage_with(t));
  const Tensor tt = t.transpose(1, 2);  // [2, 4, 3]
  const Tensor rc = tt.reshape({8, 3});
  EXPECT_FALSE(rc.shares_storage_with(t));
  EXPECT_TRUE(rc.is_contiguous());
  // Row r of rc is (a, c) = (r / 4, r % 4), element b: 12a + 4b + c.
  expect_elements(rc, [](const Sizes& i) {
    return static_cast<double>(12 * (i[0] / 4) + 4 * i[1] + i[0] % 4);
  });
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.reshape({5, 5});
              }),
              HasSubstr("Tensor.reshape: cannot view sizes [2, 3, 4] (24 elements) as [5, 5] "
                        "(25 elements)"));
}

TEST(Slice, IndexMath) {
  const Tensor t = base234();
  const Tensor s = t.slice(1, 1, 3);  // b in [1, 3)
  EXPECT_EQ(s.sizes(), (Sizes{2, 2, 4}));
  EXPECT_EQ(s.strides(), (Sizes{12, 4, 1}));
  EXPECT_EQ(s.offset(), 4);
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(static_cast<char*>(s.data_ptr()) - static_cast<char*>(t.data_ptr()), 16);
  expect_elements(
      s, [](const Sizes& i) { return static_cast<double>(12 * i[0] + 4 * (i[1] + 1) + i[2]); });
  const Tensor stepped = t.slice(-1, 1, 4, 2);  // c in {1, 3}
  EXPECT_EQ(stepped.sizes(), (Sizes{2, 3, 2}));
  EXPECT_EQ(stepped.strides(), (Sizes{12, 4, 2}));
  expect_elements(stepped, [](const Sizes& i) {
    return static_cast<double>(12 * i[0] + 4 * i[1] + 1 + 2 * i[2]);
  });
  const Tensor neg = t.slice(2, -3, -1);  // c in [1, 3)
  EXPECT_EQ(neg.sizes(), (Sizes{2, 3, 2}));
  EXPECT_EQ(neg.offset(), 1);
  EXPECT_EQ(t.slice(0, 1, 2).offset(), 12);
  EXPECT_TRUE(t.slice(0, 1, 2).is_contiguous());
  EXPECT_EQ(t.slice(1, 2, 2).numel(), 0);                    // empty slice
  EXPECT_EQ(t.slice(2, 0, 4, 3).sizes(), (Sizes{2, 3, 2}));  // c in {0, 3}
  EXPECT_EQ(t.slice(2, 0, 4, 5).sizes(), (Sizes{2, 3, 1}));
  // A slice of a slice.
  const Tensor ss = t.slice(2, 1, 4).slice(2, 1, 3);  // c in {2, 3}
  expect_elements(
      ss, [](const Sizes& i) { return static_cast<double>(12 * i[0] + 4 * i[1] + 2 + i[2]); });
}

TEST(Slice, Errors) {
  const Tensor t = base234();
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.slice(1, 0, 4); }),
              HasSubstr("Tensor.slice: end 4 is out of range for dimension 1 of size 3 (sizes "
                        "[2, 3, 4]; expected -3..3)"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.slice(1, -4, 2); }),
              HasSubstr("Tensor.slice: start -4 is out of range for dimension 1 of size 3"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.slice(1, 2, 1); }),
              HasSubstr("Tensor.slice: start 2 is after end 1 for dimension 1 of size 3"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.slice(1, 0, 2, 0); }),
              HasSubstr("Tensor.slice: step must be >= 1, got 0"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.slice(3, 0, 1); }),
              HasSubstr("Tensor.slice: dimension 3 is out of range for a 3-d tensor"));
}

TEST(Transpose, IndexMath) {
  const Tensor t = base234();
  const Tensor tr = t.transpose(0, 2);
  EXPECT_EQ(tr.sizes(), (Sizes{4, 3, 2}));
  EXPECT_EQ(tr.strides(), (Sizes{1, 4, 12}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_TRUE(tr.shares_storage_with(t));
  expect_elements(tr,
                  [](const Sizes& i) { return static_cast<double>(12 * i[2] + 4 * i[1] + i[0]); });
  EXPECT_EQ(t.transpose(-1, 1).sizes(), (Sizes{2, 4, 3}));
  EXPECT_EQ(t.transpose(1, 1).strides(), t.strides());
  EXPECT_TRUE(t.transpose(0, 2).transpose(2, 0).is_contiguous());
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.transpose(0, -4); }),
              HasSubstr("Tensor.transpose: dimension -4 is out of range for a 3-d tensor of "
                        "sizes [2, 3, 4] (expected -3..2)"));
}

TEST(Permute, IndexMath) {
  const Tensor t = base234();
  const Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Sizes{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Sizes{1, 12, 4}));
  expect_elements(p,
                  [](const Sizes& i) { return static_cast<double>(12 * i[1] + 4 * i[2] + i[0]); });
  EXPECT_EQ(t.permute({-1, -3, -2}).sizes(), (Sizes{4, 2, 3}));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.permute({0, 1});
              }),
              HasSubstr("Tensor.permute: dims [0, 1] have 2 entries but the tensor [2, 3, 4] "
                        "has 3 dimensions"));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.permute({0, 2, -1});
              }),
              HasSubstr("Tensor.permute: dims [0, 2, -1] repeat dimension 2"));
  EXPECT_THAT(error_message<SigErr>([&] {
                (void)t.permute({0, 1, 3});
              }),
              HasSubstr("dimension 3 is out of range"));
}

TEST(Select, IndexMath) {
  const Tensor t = base234();
  const Tensor s = t.select(1, 2);
  EXPECT_EQ(s.sizes(), (Sizes{2, 4}));
  EXPECT_EQ(s.strides(), (Sizes{12, 1}));
  EXPECT_EQ(s.offset(), 8);
  expect_elements(s, [](const Sizes& i) { return static_cast<double>(12 * i[0] + 8 + i[1]); });
  const Tensor last = t.select(-1, -1);
  EXPECT_EQ(last.sizes(), (Sizes{2, 3}));
  expect_elements(last,
                  [](const Sizes& i) { return static_cast<double>(12 * i[0] + 4 * i[1] + 3); });
  const Tensor scalar = t.select(0, 1).select(0, 2).select(0, 3);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item(), 23.0);
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.select(1, 3); }),
              HasSubstr("Tensor.select: index 3 is out of range for dimension 1 of size 3 "
                        "(sizes [2, 3, 4]; expected -3..2)"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)scalar.select(0, 0); }),
              HasSubstr("Tensor.select: dimension 0 is out of range for a 0-d tensor"));
}

TEST(Unsqueeze, IndexMath) {
  const Tensor t = base234();
  const Tensor u0 = t.unsqueeze(0);
  EXPECT_EQ(u0.sizes(), (Sizes{1, 2, 3, 4}));
  EXPECT_EQ(u0.strides(), (Sizes{24, 12, 4, 1}));
  EXPECT_TRUE(u0.is_contiguous());
  const Tensor u3 = t.unsqueeze(-1);
  EXPECT_EQ(u3.sizes(), (Sizes{2, 3, 4, 1}));
  EXPECT_EQ(u3.strides(), (Sizes{12, 4, 1, 1}));
  const Tensor u2 = t.transpose(0, 2).unsqueeze(2);  // [4, 3, 1, 2]
  EXPECT_EQ(u2.sizes(), (Sizes{4, 3, 1, 2}));
  EXPECT_EQ(u2.strides(), (Sizes{1, 4, 24, 12}));
  expect_elements(u2,
                  [](const Sizes& i) { return static_cast<double>(12 * i[3] + 4 * i[1] + i[0]); });
  EXPECT_EQ(Tensor::full({}, 1, DType::int32).unsqueeze(0).sizes(), (Sizes{1}));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.unsqueeze(4); }),
              HasSubstr("Tensor.unsqueeze: dimension 4 is out of range for a 3-d tensor of "
                        "sizes [2, 3, 4] (expected -4..3)"));
  EXPECT_THAT(error_message<SigErr>([&] { (void)t.unsqueeze(-5); }), HasSubstr("dimension -5"));
}

TEST(Flatten, ViewOrCopy) {
  const Tensor t = base234();
  const Tensor f = t.flatten();
  EXPECT_EQ(f.sizes(), (Sizes{24}));
  EXPECT_TRUE(f.shares_storage_with(t));
  const Tensor g = t.transpose(0, 1).flatten();  // not viewable: copied
  EXPECT_FALSE(g.shares_storage_with(t));
  expect_elements(g, [](const Sizes& i) {
    const int64_t b = i[0] / 8, a = (i[0] / 4) % 2, c = i[0] % 4;
    return static_cast<double>(12 * a + 4 * b + c);
  });
  EXPECT_EQ(Tensor::full({}, 1, DType::int32).flatten().sizes(), (Sizes{1}));
  const Tensor one_d = t.slice(2, 0, 4, 2).select(0, 0).select(0, 0);
  EXPECT_TRUE(one_d.flatten().shares_storage_with(t));
}

TEST(Views, WritesThroughViewsReachTheBase) {
  Tensor t = Tensor::zeros({3, 4}, DType::int32);
  t.transpose(0, 1).select(0, 2).fill_(5);  // column 2
  t.slice(0, 2, 3).view({4}).set_at({0}, 9);
  EXPECT_THAT(t.to_vector(), ElementsAre(0, 0, 5, 0, 0, 0, 5, 0, 9, 0, 5, 0));
}

}  // namespace
