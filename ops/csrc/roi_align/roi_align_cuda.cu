// CUDA RoIAlign: one thread per output (forward) or per output gradient
// (backward, atomic adds into an accumulation-precision buffer).
#include "roi_align.h"

#include "../cuda_common.cuh"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

namespace streamseg {
namespace {

template <typename scalar_t, typename acc_t>
__global__ void forward_kernel(
    int64_t total, const scalar_t* input, const acc_t* rois, acc_t scale, int64_t batch,
    int64_t channels, int64_t height, int64_t width, int64_t ph, int64_t pw,
    int64_t sampling_ratio, bool aligned, scalar_t* out) {
  STREAMSEG_GRID_LOOP(idx, total) {
    const int64_t q = idx % pw;
    const int64_t p = (idx / pw) % ph;
    const int64_t c = (idx / (pw * ph)) % channels;
    const int64_t k = idx / (pw * ph * channels);
    const acc_t* roi = rois + 5 * k;
    const auto g = roi_geometry<acc_t>(roi, scale, ph, pw, sampling_ratio, aligned);
    const auto b = static_cast<int64_t>(roi[0]);
    acc_t acc = 0;
    if (b >= 0 && b < batch) {
      const scalar_t* plane = input + (b * channels + c) * height * width;
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        const AxisTap<acc_t> y =
            axis_tap(sample_coord(g.start_y, g.bin_h, p, iy, g.grid_h), height);
        for (int64_t ix = 0; ix < g.grid_w; ++ix) {
          const AxisTap<acc_t> x =
              axis_tap(sample_coord(g.start_x, g.bin_w, q, ix, g.grid_w), width);
          const scalar_t* r0 = plane + y.low * width;
          const scalar_t* r1 = plane + y.high * width;
          acc += y.w_low * x.w_low * static_cast<acc_t>(r0[x.low]) +
                 y.w_low * x.w_high * static_cast<acc_t>(r0[x.high]) +
                 y.w_high * x.w_low * static_cast<acc_t>(r1[x.low]) +
                 y.w_high * x.w_high * static_cast<acc_t>(r1[x.high]);
        }
      }
    }
    out[idx] = static_cast<scalar_t>(acc / g.count);
  }
}

template <typename scalar_t, typename acc_t>
__global__ void backward_kernel(
    int64_t total, const scalar_t* grad, const acc_t* rois, acc_t scale, int64_t batch,
    int64_t channels, int64_t height, int64_t width, int64_t ph, int64_t pw,
    int64_t sampling_ratio, bool aligned, acc_t* grad_input) {
  STREAMSEG_GRID_LOOP(idx, total) {
    const int64_t q = idx % pw;
    const int64_t p = (idx / pw) % ph;
    const int64_t c = (idx / (pw * ph)) % channels;
    const int64_t k = idx / (pw * ph * channels);
    const acc_t* roi = rois + 5 * k;
    const auto g = roi_geometry<acc_t>(roi, scale, ph, pw, sampling_ratio, aligned);
    const auto b = static_cast<int64_t>(roi[0]);
    if (b < 0 || b >= batch) continue;
    acc_t* plane = grad_input + (b * channels + c) * height * width;
    const acc_t v = static_cast<acc_t>(grad[idx]) / g.count;
    for (int64_t iy = 0; iy < g.grid_h; ++iy) {
      const AxisTap<acc_t> y = axis_tap(sample_coord(g.start_y, g.bin_h, p, iy, g.grid_h), height);
      for (int64_t ix = 0; ix < g.grid_w; ++ix) {
        const AxisTap<acc_t> x =
            axis_tap(sample_coord(g.start_x, g.bin_w, q, ix, g.grid_w), width);
        if (y.w_low + y.w_high == acc_t(0) || x.w_low + x.w_high == acc_t(0)) continue;
        atomicAdd(plane + y.low * width + x.low, v * y.w_low * x.w_low);
        atomicAdd(plane + y.low * width + x.high, v * y.w_low * x.w_high);
        atomicAdd(plane + y.high * width + x.low, v * y.w_high * x.w_low);
        atomicAdd(plane + y.high * width + x.high, v * y.w_high * x.w_high);
      }
    }
  }
}

}  // namespace

at::Tensor roi_align_forward_cuda(
    const at::Tensor& input_in, const at::Tensor& rois_in, double spatial_scale,
    int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  TORCH_CHECK(input_in.is_cuda() && rois_in.is_cuda(), "input and rois must be CUDA tensors");
  TORCH_CHECK(input_in.dim() == 4, "input must be (B, C, H, W), got ", input_in.sizes());
  TORCH_CHECK(rois_in.dim() == 2 && rois_in.size(1) == 5, "rois must be (K, 5)");
  c10::cuda::CUDAGuard guard(input_in.device());
  const int64_t k = rois_in.size(0), channels = input_in.size(1);
  const int64_t height = input_in.size(2), width = input_in.size(3);
  at::Tensor out = at::zeros({k, channels, pooled_height, pooled_width}, input_in.options());
  if (out.numel() == 0 || height == 0 || width == 0) return out;
  const at::Tensor input = input_in.contiguous();
  const at::Tensor rois = rois_in.to(at::toOpMathType(input.scalar_type())).contiguous();
  const int64_t total = out.numel();
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "streamseg_roi_align_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        forward_kernel<scalar_t, acc_t><<<blocks_for(total), kThreads, 0, stream>>>(
            total, input.const_data_ptr<scalar_t>(), rois.const_data_ptr<acc_t>(),
            static_cast<acc_t>(spatial_scale), input.size(0), channels, height, width,
            pooled_height, pooled_width, sampling_ratio, aligned,
            out.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
  return out;
}

at::Tensor roi_align_backward_cuda(
    const at::Tensor& grad_in, const at::Tensor& rois_in, double spatial_scale,
    int64_t pooled_height, int64_t pooled_width, int64_t batch_size, int64_t channels,
    int64_t height, int64_t width, int64_t sampling_ratio, bool aligned) {
  TORCH_CHECK(grad_in.is_cuda() && rois_in.is_cuda(), "grad and rois must be CUDA tensors");
  TORCH_CHECK(
      grad_in.dim() == 4 && grad_in.size(0) == rois_in.size(0) && grad_in.size(1) == channels,
      "grad must be (K, C, ph, pw), got ", grad_in.sizes());
  c10::cuda::CUDAGuard guard(grad_in.device());
  const auto acc_type = at::toOpMathType(grad_in.scalar_type());
  at::Tensor grad_input =
      at::zeros({batch_size, channels, height, width}, grad_in.options().dtype(acc_type));
  const int64_t total = grad_in.numel();
  if (total > 0 && height > 0 && width > 0) {
    const at::Tensor grad = grad_in.contiguous();
    const at::Tensor rois = rois_in.to(acc_type).contiguous();
    auto stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kHalf, at::kBFloat16, grad.scalar_type(), "streamseg_roi_align_backward_cuda", [&] {
          using acc_t = at::opmath_type<scalar_t>;
          backward_kernel<scalar_t, acc_t><<<blocks_for(total), kThreads, 0, stream>>>(
              total, grad.const_data_ptr<scalar_t>(), rois.const_data_ptr<acc_t>(),
              static_cast<acc_t>(spatial_scale), batch_size, channels, height, width,
              pooled_height, pooled_width, sampling_ratio, aligned,
              grad_input.mutable_data_ptr<acc_t>());
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
  }
  return grad_input.to(grad_in.scalar_type());
}

}  // namespace streamseg
