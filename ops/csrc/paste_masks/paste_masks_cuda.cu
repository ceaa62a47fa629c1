// CUDA mask paste: the integer boxes come from a small kernel over the
// masks, then one thread per output pixel interpolates (or writes 0).
#include "paste_masks.h"

#include "../cuda_common.cuh"

#include <ATen/ops/empty.h>

namespace streamseg {
namespace {

template <typename T>
__global__ void int_boxes_kernel(int64_t n, const T* boxes, T scale, int64_t* out) {
  STREAMSEG_GRID_LOOP(k, n) {
    if (!paste_box<T>(boxes + 4 * k, scale, out + 4 * k)) {
      out[4 * k] = 0;
      out[4 * k + 1] = 0;
      out[4 * k + 2] = -1;  // pastes nothing
      out[4 * k + 3] = -1;
    }
  }
}

template <typename scalar_t, typename acc_t>
__device__ inline acc_t padded_value(const scalar_t* mask, int64_t m, int64_t pad, int64_t r, int64_t c) {
  r -= pad;
  c -= pad;
  if (r < 0 || c < 0 || r >= m || c >= m) return acc_t(0);
  return static_cast<acc_t>(mask[r * m + c]);
}

template <typename scalar_t, typename acc_t>
__global__ void paste_kernel(
    int64_t total, const scalar_t* masks, const int64_t* int_boxes, int64_t m, int64_t pad,
    int64_t h, int64_t w, scalar_t* out) {
  STREAMSEG_GRID_LOOP(idx, total) {
    const int64_t x = idx % w;
    const int64_t y = (idx / w) % h;
    const int64_t k = idx / (w * h);
    const int64_t* ib = int_boxes + 4 * k;
    acc_t value = 0;
    if (x >= ib[0] && x <= ib[2] && y >= ib[1] && y <= ib[3]) {
      const int64_t mp = m + 2 * pad;
      const int64_t out_w = max(ib[2] - ib[0] + 1, static_cast<int64_t>(1));
      const int64_t out_h = max(ib[3] - ib[1] + 1, static_cast<int64_t>(1));
      const ResizeTap<acc_t> tx = resize_tap<acc_t>(x - ib[0], mp, out_w);
      const ResizeTap<acc_t> ty = resize_tap<acc_t>(y - ib[1], mp, out_h);
      const scalar_t* mask = masks + k * m * m;
      const acc_t top = padded_value<scalar_t, acc_t>(mask, m, pad, ty.i0, tx.i0) * tx.w0 +
                        padded_value<scalar_t, acc_t>(mask, m, pad, ty.i0, tx.i1) * tx.w1;
      const acc_t bottom = padded_value<scalar_t, acc_t>(mask, m, pad, ty.i1, tx.i0) * tx.w0 +
                           padded_value<scalar_t, acc_t>(mask, m, pad, ty.i1, tx.i1) * tx.w1;
      value = top * ty.w0 + bottom * ty.w1;
    }
    out[idx] = static_cast<scalar_t>(value);
  }
}

}  // namespace

at::Tensor paste_masks_cuda(
    const at::Tensor& masks_in, const at::Tensor& boxes_in, int64_t height, int64_t width,
    int64_t padding) {
  TORCH_CHECK(masks_in.is_cuda() && boxes_in.is_cuda(), "masks and boxes must be CUDA tensors");
  TORCH_CHECK(
      masks_in.dim() == 3 && masks_in.size(1) == masks_in.size(2),
      "masks must be (N, M, M), got ", masks_in.sizes());
  TORCH_CHECK(
      boxes_in.dim() == 2 && boxes_in.size(1) == 4 && boxes_in.size(0) == masks_in.size(0),
      "boxes must be (N, 4) with N masks, got ", boxes_in.sizes());
  TORCH_CHECK(padding >= 0 && height >= 0 && width >= 0, "padding and frame size must be >= 0");
  c10::cuda::CUDAGuard guard(masks_in.device());
  at::Tensor out = at::empty({masks_in.size(0), height, width}, masks_in.options());
  if (out.numel() == 0) return out;
  TORCH_CHECK(masks_in.size(1) > 0, "masks must not be empty");
  const int64_t n = masks_in.size(0), m = masks_in.size(1);
  const at::Tensor masks = masks_in.contiguous();
  const at::Tensor boxes = boxes_in.contiguous();
  at::Tensor int_boxes = at::empty({n, 4}, boxes.options().dtype(at::kLong));
  auto stream = c10::cuda::getCurrentCUDAStream();
  const double scale = static_cast<double>(m + 2 * padding) / static_cast<double>(m);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, boxes.scalar_type(), "streamseg_paste_boxes_cuda", [&] {
        int_boxes_kernel<scalar_t><<<blocks_for(n), kThreads, 0, stream>>>(
            n, boxes.const_data_ptr<scalar_t>(), static_cast<scalar_t>(scale),
            int_boxes.mutable_data_ptr<int64_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  const int64_t total = out.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "streamseg_paste_masks_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        paste_kernel<scalar_t, acc_t><<<blocks_for(total), kThreads, 0, stream>>>(
            total, masks.const_data_ptr<scalar_t>(), int_boxes.const_data_ptr<int64_t>(), m,
            padding, height, width, out.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

}  // namespace streamseg
