// CUDA NMS: a kernel fills, for every sorted box, a bitmask of the later
// boxes it suppresses (64 per word, one thread per box and block of 64
// candidates); the greedy pass over the words then runs on the host.
#include "nms.h"

#include "../cuda_common.cuh"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/sort.h>

#include <vector>

namespace streamseg {
namespace {

constexpr int kWord = 64;

template <typename T>
__device__ inline bool suppresses(const T* a, const T* b, T thr) {
  const T area_a = mul_rn(a[2] - a[0], a[3] - a[1]);
  const T area_b = mul_rn(b[2] - b[0], b[3] - b[1]);
  const T left = a[0] > b[0] ? a[0] : b[0];
  const T top = a[1] > b[1] ? a[1] : b[1];
  const T right = a[2] < b[2] ? a[2] : b[2];
  const T bottom = a[3] < b[3] ? a[3] : b[3];
  T w = right - left;
  T h = bottom - top;
  w = w > T(0) ? w : T(0);
  h = h > T(0) ? h : T(0);
  const T inter = mul_rn(w, h);
  return inter / (area_a + area_b - inter) > thr;
}

template <typename T>
__global__ void suppression_mask_kernel(
    int64_t n, const T* boxes, const int64_t* cls, T thr, int64_t words,
    unsigned long long* mask) {
  const int64_t row_block = blockIdx.y, col_block = blockIdx.x;
  if (col_block < row_block) return;
  const int64_t rows = min(n - row_block * kWord, static_cast<int64_t>(kWord));
  const int64_t cols = min(n - col_block * kWord, static_cast<int64_t>(kWord));
  __shared__ T shared_boxes[kWord * 4];
  __shared__ int64_t shared_cls[kWord];
  if (threadIdx.x < cols) {
    const int64_t j = col_block * kWord + threadIdx.x;
    for (int c = 0; c < 4; ++c) shared_boxes[threadIdx.x * 4 + c] = boxes[j * 4 + c];
    shared_cls[threadIdx.x] = cls != nullptr ? cls[j] : 0;
  }
  __syncthreads();
  if (threadIdx.x >= rows) return;
  const int64_t i = row_block * kWord + threadIdx.x;
  const T* box = boxes + i * 4;
  const int64_t my_cls = cls != nullptr ? cls[i] : 0;
  unsigned long long bits = 0;
  const int64_t start = row_block == col_block ? threadIdx.x + 1 : 0;
  for (int64_t j = start; j < cols; ++j) {
    if (shared_cls[j] == my_cls && suppresses(box, shared_boxes + j * 4, thr)) bits |= 1ULL << j;
  }
  mask[i * words + col_block] = bits;
}

at::Tensor nms_cuda_impl(
    const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor* idxs,
    double iou_threshold) {
  TORCH_CHECK(boxes.is_cuda() && scores.is_cuda(), "boxes and scores must be CUDA tensors");
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, "boxes must be (N, 4), got ", boxes.sizes());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0), "scores must be (N,)");
  c10::cuda::CUDAGuard guard(boxes.device());
  const int64_t n = boxes.size(0);
  if (n == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  const at::Tensor order = std::get<1>(at::sort(scores, true, 0, true));
  const at::Tensor sorted = boxes.index_select(0, order).contiguous();
  at::Tensor cls;
  if (idxs != nullptr) cls = idxs->index_select(0, order).to(at::kLong).contiguous();
  const int64_t words = (n + kWord - 1) / kWord;
  at::Tensor mask = at::empty({n * words}, boxes.options().dtype(at::kLong));
  const dim3 grid(static_cast<unsigned int>(words), static_cast<unsigned int>(words));
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "streamseg_nms_cuda", [&] {
    suppression_mask_kernel<scalar_t><<<grid, kWord, 0, stream>>>(
        n, sorted.const_data_ptr<scalar_t>(),
        idxs != nullptr ? cls.const_data_ptr<int64_t>() : nullptr,
        static_cast<scalar_t>(iou_threshold), words,
        reinterpret_cast<unsigned long long*>(mask.mutable_data_ptr<int64_t>()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  const at::Tensor host = mask.cpu();
  const auto* bits = reinterpret_cast<const unsigned long long*>(host.const_data_ptr<int64_t>());
  std::vector<unsigned long long> removed(static_cast<size_t>(words), 0);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < n; ++i) {
    if (removed[i / kWord] & (1ULL << (i % kWord))) continue;
    keep.push_back(i);
    const unsigned long long* row = bits + i * words;
    for (int64_t w = i / kWord; w < words; ++w) removed[w] |= row[w];
  }
  const at::Tensor positions =
      at::from_blob(keep.data(), {static_cast<int64_t>(keep.size())}, at::kLong)
          .to(boxes.device());
  return order.index_select(0, positions);
}

}  // namespace

at::Tensor nms_cuda(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  return nms_cuda_impl(boxes, scores, nullptr, iou_threshold);
}

at::Tensor batched_nms_cuda(
    const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
    double iou_threshold) {
  TORCH_CHECK(idxs.dim() == 1 && idxs.size(0) == boxes.size(0), "idxs must be (N,)");
  return nms_cuda_impl(boxes, scores, &idxs, iou_threshold);
}

}  // namespace streamseg
