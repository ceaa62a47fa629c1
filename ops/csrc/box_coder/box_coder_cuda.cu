// CUDA box decoding: one thread per (box, class).
#include "box_coder.h"

#include "../cuda_common.cuh"

#include <ATen/ops/empty.h>

namespace streamseg {
namespace {

template <typename T>
__global__ void decode_kernel(
    int64_t total, int64_t k, const T* deltas, const T* boxes, DecodeParams<T> p, T* out) {
  STREAMSEG_GRID_LOOP(idx, total) { decode_one(boxes + 4 * (idx / k), deltas + 4 * idx, p, out + 4 * idx); }
}

}  // namespace

at::Tensor decode_boxes_cuda(
    const at::Tensor& deltas_in, const at::Tensor& boxes_in, double wx, double wy, double ww,
    double wh, double clamp) {
  TORCH_CHECK(deltas_in.is_cuda() && boxes_in.is_cuda(), "deltas and boxes must be CUDA tensors");
  TORCH_CHECK(
      deltas_in.dim() == 2 && deltas_in.size(1) % 4 == 0, "deltas must be (N, 4k), got ",
      deltas_in.sizes());
  TORCH_CHECK(
      boxes_in.dim() == 2 && boxes_in.size(1) == 4 && boxes_in.size(0) == deltas_in.size(0),
      "boxes must be (N, 4) with N rows of deltas, got ", boxes_in.sizes());
  c10::cuda::CUDAGuard guard(deltas_in.device());
  const int64_t n = deltas_in.size(0), k = deltas_in.size(1) / 4;
  const at::Tensor deltas = deltas_in.contiguous();
  const at::Tensor boxes = boxes_in.to(deltas.scalar_type()).contiguous();
  at::Tensor out = at::empty({n, k, 4}, deltas.options());
  const int64_t total = n * k;
  if (total == 0) return out;
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(deltas.scalar_type(), "streamseg_decode_boxes_cuda", [&] {
    const DecodeParams<scalar_t> p{
        static_cast<scalar_t>(wx), static_cast<scalar_t>(wy), static_cast<scalar_t>(ww),
        static_cast<scalar_t>(wh), static_cast<scalar_t>(clamp)};
    decode_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        total, k, deltas.const_data_ptr<scalar_t>(), boxes.const_data_ptr<scalar_t>(), p,
        out.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace streamseg
