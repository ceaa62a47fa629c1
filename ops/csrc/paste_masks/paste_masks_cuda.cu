// CUDA mask paste: the integer boxes come from a small kernel over the
// masks, then one thread per output pixel interpolates (or writes 0).
#include "paste_masks.h"

#include "../cuda_common.cuh"

#include <ATen/ops/empty.h>

#include <type_traits>

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

// out_t = scalar_t: the probability; out_t = bool: whether it passes
// `threshold`, compared in scalar_t as `paste_masks(...) > threshold` would.
template <typename scalar_t, typename acc_t, typename out_t>
__global__ void paste_kernel(
    int64_t total, const scalar_t* masks, const int64_t* int_boxes, int64_t m, int64_t pad,
    int64_t h, int64_t w, acc_t threshold, out_t* out) {
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
    if constexpr (std::is_same_v<out_t, bool>) {
      out[idx] = static_cast<acc_t>(static_cast<scalar_t>(value)) > threshold;
    } else {
      out[idx] = static_cast<out_t>(value);
    }
  }
}

// The integer boxes of `boxes_in` (N, 4) on the GPU, as paste_boxes_cpu.
at::Tensor int_boxes_cuda(const at::Tensor& boxes_in, int64_t m, int64_t padding) {
  const int64_t n = boxes_in.size(0);
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
  return int_boxes;
}

void check_cuda_paste_args(
    const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
    int64_t padding) {
  TORCH_CHECK(masks.is_cuda() && boxes.is_cuda(), "masks and boxes must be CUDA tensors");
  check_paste_args(masks, boxes, height, width, padding);
}

// Pastes into `out` (N, h, w): probabilities (binary = false) or their
// comparison with `threshold` (binary = true, out is bool).
void paste_into(
    const at::Tensor& masks_in, const at::Tensor& boxes_in, int64_t padding, bool binary,
    double threshold, at::Tensor& out) {
  TORCH_CHECK(masks_in.size(1) > 0, "masks must not be empty");
  const int64_t m = masks_in.size(1);
  const at::Tensor masks = masks_in.contiguous();
  const at::Tensor int_boxes = int_boxes_cuda(boxes_in, m, padding);
  auto stream = c10::cuda::getCurrentCUDAStream();
  const int64_t total = out.numel(), height = out.size(1), width = out.size(2);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "streamseg_paste_masks_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* src = masks.const_data_ptr<scalar_t>();
        const int64_t* ib = int_boxes.const_data_ptr<int64_t>();
        if (binary) {
          const acc_t thr = static_cast<acc_t>(static_cast<scalar_t>(threshold));
          paste_kernel<scalar_t, acc_t, bool><<<blocks_for(total), kThreads, 0, stream>>>(
              total, src, ib, m, padding, height, width, thr, out.mutable_data_ptr<bool>());
        } else {
          paste_kernel<scalar_t, acc_t, scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
              total, src, ib, m, padding, height, width, acc_t(0),
              out.mutable_data_ptr<scalar_t>());
        }
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

}  // namespace

at::Tensor paste_masks_cuda(
    const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
    int64_t padding) {
  check_cuda_paste_args(masks, boxes, height, width, padding);
  c10::cuda::CUDAGuard guard(masks.device());
  at::Tensor out = at::empty({masks.size(0), height, width}, masks.options());
  if (out.numel() > 0) paste_into(masks, boxes, padding, false, 0.0, out);
  return out;
}

at::Tensor paste_masks_binary_cuda(
    const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
    int64_t padding, double threshold) {
  check_cuda_paste_args(masks, boxes, height, width, padding);
  c10::cuda::CUDAGuard guard(masks.device());
  at::Tensor out = at::empty({masks.size(0), height, width}, masks.options().dtype(at::kBool));
  if (out.numel() > 0) paste_into(masks, boxes, padding, true, threshold, out);
  return out;
}

}  // namespace streamseg
