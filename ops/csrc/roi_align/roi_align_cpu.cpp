// CPU RoIAlign. For each RoI the bilinear taps of every sample (4 plane
// offsets and weights) are computed once and reused for all channels. The
// forward pass is parallel over RoIs; the backward pass is parallel over
// channels, so that no two threads add into the same gradient plane.
#include "roi_align.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <type_traits>
#include <vector>

namespace streamseg {
namespace {

// From this many channels on, the forward pass runs channels-last.
constexpr int64_t kChannelsLastMin = 16;

template <typename T>
struct Tap {
  int64_t offset[4];
  T weight[4];
};

// Taps of all samples of all bins of one RoI, bin-major; bins[b] is the
// index of bin b's first tap (bins has ph * pw + 1 entries).
template <typename T>
void roi_taps(
    const RoiGeometry<T>& g, int64_t ph, int64_t pw, int64_t height, int64_t width,
    std::vector<Tap<T>>& taps, std::vector<int64_t>& bins) {
  taps.clear();
  bins.assign(1, 0);
  const int64_t gh = std::max<int64_t>(g.grid_h, 0), gw = std::max<int64_t>(g.grid_w, 0);
  std::vector<AxisTap<T>> xs(static_cast<size_t>(pw * gw));
  for (int64_t q = 0; q < pw; ++q)
    for (int64_t ix = 0; ix < gw; ++ix)
      xs[q * gw + ix] = axis_tap(sample_coord(g.start_x, g.bin_w, q, ix, g.grid_w), width);
  for (int64_t p = 0; p < ph; ++p) {
    for (int64_t q = 0; q < pw; ++q) {
      for (int64_t iy = 0; iy < gh; ++iy) {
        const AxisTap<T> y = axis_tap(sample_coord(g.start_y, g.bin_h, p, iy, g.grid_h), height);
        for (int64_t ix = 0; ix < gw; ++ix) {
          const AxisTap<T>& x = xs[q * gw + ix];
          taps.push_back(Tap<T>{
              {y.low * width + x.low, y.low * width + x.high, y.high * width + x.low,
               y.high * width + x.high},
              {y.w_low * x.w_low, y.w_low * x.w_high, y.w_high * x.w_low, y.w_high * x.w_high}});
        }
      }
      bins.push_back(static_cast<int64_t>(taps.size()));
    }
  }
}

template <typename T>
int64_t roi_batch(const T* roi, int64_t batch_size) {
  const auto b = static_cast<int64_t>(roi[0]);
  TORCH_CHECK(b >= 0 && b < batch_size, "roi batch index ", b, " outside [0, ", batch_size, ")");
  return b;
}

// acc[c] += w * src[c]: the inner loop of the channels-last forward pass,
// compiled for AVX2+FMA as well as the baseline and picked at run time.
template <typename scalar_t, typename acc_t>
inline void axpy(acc_t* __restrict acc, const scalar_t* __restrict src, acc_t w, int64_t n) {
  for (int64_t c = 0; c < n; ++c) acc[c] += w * static_cast<acc_t>(src[c]);
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define STREAMSEG_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define STREAMSEG_CLONES
#endif

STREAMSEG_CLONES void axpy_float(float* acc, const float* src, float w, int64_t n) {
  axpy(acc, src, w, n);
}

template <typename scalar_t, typename acc_t>
inline void accumulate(acc_t* acc, const scalar_t* src, acc_t w, int64_t n) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    axpy_float(acc, src, w, n);
  } else {
    axpy(acc, src, w, n);
  }
}

// Forward pass over a channels-last copy of the input: every tap reads C
// contiguous values, so the channel loop is vectorised. Used when C is
// large enough (FPN features) to pay for the layout change.
template <typename scalar_t>
void forward_kernel_nhwc(
    const at::Tensor& nhwc, const at::Tensor& rois, at::Tensor& out, double scale,
    int64_t ph, int64_t pw, int64_t sampling_ratio, bool aligned) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = nhwc.size(0), height = nhwc.size(1), width = nhwc.size(2);
  const int64_t channels = nhwc.size(3);
  const scalar_t* in = nhwc.const_data_ptr<scalar_t>();
  const acc_t* r = rois.const_data_ptr<acc_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  const int64_t bins_per_roi = ph * pw;
  at::parallel_for(0, rois.size(0), 1, [&](int64_t lo, int64_t hi) {
    std::vector<Tap<acc_t>> taps;
    std::vector<int64_t> bins;
    std::vector<acc_t> acc(static_cast<size_t>(bins_per_roi * channels));
    for (int64_t k = lo; k < hi; ++k) {
      const acc_t* roi = r + 5 * k;
      const auto g = roi_geometry<acc_t>(roi, acc_t(scale), ph, pw, sampling_ratio, aligned);
      roi_taps(g, ph, pw, height, width, taps, bins);
      const scalar_t* image = in + roi_batch(roi, batch) * height * width * channels;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t bin = 0; bin < bins_per_roi; ++bin) {
        acc_t* a = acc.data() + bin * channels;
        for (int64_t t = bins[bin]; t < bins[bin + 1]; ++t) {
          for (int j = 0; j < 4; ++j) {
            const acc_t w = taps[t].weight[j];
            if (w != acc_t(0)) accumulate(a, image + taps[t].offset[j] * channels, w, channels);
          }
        }
      }
      scalar_t* dst = o + k * channels * bins_per_roi;
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t bin = 0; bin < bins_per_roi; ++bin)
          dst[c * bins_per_roi + bin] = static_cast<scalar_t>(acc[bin * channels + c] / g.count);
    }
  });
}

template <typename scalar_t>
void forward_kernel(
    const at::Tensor& input, const at::Tensor& rois, at::Tensor& out, double scale,
    int64_t ph, int64_t pw, int64_t sampling_ratio, bool aligned) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = input.size(0), channels = input.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  const acc_t* r = rois.const_data_ptr<acc_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, rois.size(0), 1, [&](int64_t lo, int64_t hi) {
    std::vector<Tap<acc_t>> taps;
    std::vector<int64_t> bins;
    for (int64_t k = lo; k < hi; ++k) {
      const acc_t* roi = r + 5 * k;
      const auto g = roi_geometry<acc_t>(roi, acc_t(scale), ph, pw, sampling_ratio, aligned);
      roi_taps(g, ph, pw, height, width, taps, bins);
      const int64_t b = roi_batch(roi, batch);
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = in + (b * channels + c) * height * width;
        scalar_t* dst = o + (k * channels + c) * ph * pw;
        for (int64_t bin = 0; bin < ph * pw; ++bin) {
          acc_t acc = 0;
          for (int64_t t = bins[bin]; t < bins[bin + 1]; ++t) {
            const Tap<acc_t>& tp = taps[t];
            acc += tp.weight[0] * static_cast<acc_t>(plane[tp.offset[0]]) +
                   tp.weight[1] * static_cast<acc_t>(plane[tp.offset[1]]) +
                   tp.weight[2] * static_cast<acc_t>(plane[tp.offset[2]]) +
                   tp.weight[3] * static_cast<acc_t>(plane[tp.offset[3]]);
          }
          dst[bin] = static_cast<scalar_t>(acc / g.count);
        }
      }
    }
  });
}

template <typename scalar_t>
void backward_kernel(
    const at::Tensor& grad, const at::Tensor& rois, at::Tensor& grad_in, double scale,
    int64_t ph, int64_t pw, int64_t sampling_ratio, bool aligned) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = grad_in.size(0), channels = grad_in.size(1);
  const int64_t height = grad_in.size(2), width = grad_in.size(3);
  const scalar_t* gr = grad.const_data_ptr<scalar_t>();
  const acc_t* r = rois.const_data_ptr<acc_t>();
  acc_t* gi = grad_in.mutable_data_ptr<acc_t>();
  const int64_t n_rois = rois.size(0);
  at::parallel_for(0, channels, 1, [&](int64_t lo, int64_t hi) {
    std::vector<Tap<acc_t>> taps;
    std::vector<int64_t> bins;
    for (int64_t k = 0; k < n_rois; ++k) {
      const acc_t* roi = r + 5 * k;
      const auto g = roi_geometry<acc_t>(roi, acc_t(scale), ph, pw, sampling_ratio, aligned);
      roi_taps(g, ph, pw, height, width, taps, bins);
      const int64_t b = roi_batch(roi, batch);
      for (int64_t c = lo; c < hi; ++c) {
        acc_t* plane = gi + (b * channels + c) * height * width;
        const scalar_t* src = gr + (k * channels + c) * ph * pw;
        for (int64_t bin = 0; bin < ph * pw; ++bin) {
          const acc_t v = static_cast<acc_t>(src[bin]) / g.count;
          for (int64_t t = bins[bin]; t < bins[bin + 1]; ++t) {
            const Tap<acc_t>& tp = taps[t];
            for (int j = 0; j < 4; ++j) plane[tp.offset[j]] += v * tp.weight[j];
          }
        }
      }
    }
  });
}

void check_rois(const at::Tensor& rois) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, "rois must be (K, 5), got ", rois.sizes());
}

}  // namespace

at::Tensor roi_align_forward_cpu(
    const at::Tensor& input_in, const at::Tensor& rois_in, double spatial_scale,
    int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  TORCH_CHECK(input_in.dim() == 4, "input must be (B, C, H, W), got ", input_in.sizes());
  check_rois(rois_in);
  const int64_t k = rois_in.size(0), channels = input_in.size(1);
  at::Tensor out = at::zeros({k, channels, pooled_height, pooled_width}, input_in.options());
  if (k == 0 || input_in.size(2) == 0 || input_in.size(3) == 0) return out;
  const at::Tensor rois = rois_in.to(at::toOpMathType(input_in.scalar_type())).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input_in.scalar_type(), "streamseg_roi_align_forward", [&] {
        if (channels >= kChannelsLastMin) {
          // Free when the input already is channels-last.
          const at::Tensor nhwc = input_in.permute({0, 2, 3, 1}).contiguous();
          forward_kernel_nhwc<scalar_t>(
              nhwc, rois, out, spatial_scale, pooled_height, pooled_width, sampling_ratio,
              aligned);
        } else {
          forward_kernel<scalar_t>(
              input_in.contiguous(), rois, out, spatial_scale, pooled_height, pooled_width,
              sampling_ratio, aligned);
        }
      });
  return out;
}

at::Tensor roi_align_backward_cpu(
    const at::Tensor& grad_in, const at::Tensor& rois_in, double spatial_scale,
    int64_t pooled_height, int64_t pooled_width, int64_t batch_size, int64_t channels,
    int64_t height, int64_t width, int64_t sampling_ratio, bool aligned) {
  check_rois(rois_in);
  TORCH_CHECK(
      grad_in.dim() == 4 && grad_in.size(0) == rois_in.size(0) && grad_in.size(1) == channels,
      "grad must be (K, C, ph, pw), got ", grad_in.sizes());
  const auto acc_type = at::toOpMathType(grad_in.scalar_type());
  at::Tensor grad_input =
      at::zeros({batch_size, channels, height, width}, grad_in.options().dtype(acc_type));
  if (rois_in.size(0) == 0 || height == 0 || width == 0) return grad_input.to(grad_in.scalar_type());
  const at::Tensor grad = grad_in.contiguous();
  const at::Tensor rois = rois_in.to(acc_type).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "streamseg_roi_align_backward", [&] {
        backward_kernel<scalar_t>(
            grad, rois, grad_input, spatial_scale, pooled_height, pooled_width,
            sampling_ratio, aligned);
      });
  return grad_input.to(grad_in.scalar_type());
}

}  // namespace streamseg
