// RoIAlign forward and backward (torchvision semantics).
//
// input (B, C, H, W); rois (K, 5) rows (batch_index, x1, y1, x2, y2) in image
// pixels, scaled by spatial_scale -> (K, C, pooled_height, pooled_width).
// Each bin averages grid_h x grid_w bilinear samples, a grid side being
// sampling_ratio or, when that is <= 0, ceil(roi_side / pooled_side).
// aligned shifts coordinates by -0.5 pixel and lets RoIs be smaller than 1.
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace streamseg {

at::Tensor roi_align_forward_cpu(
    const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
    int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio, bool aligned);
at::Tensor roi_align_backward_cpu(
    const at::Tensor& grad, const at::Tensor& rois, double spatial_scale,
    int64_t pooled_height, int64_t pooled_width, int64_t batch_size, int64_t channels,
    int64_t height, int64_t width, int64_t sampling_ratio, bool aligned);

// Where one RoI's bins start, their size and the sample grid (shared by the
// forward and backward kernels so both follow the same rules).
template <typename T>
struct RoiGeometry {
  T start_y, start_x, bin_h, bin_w;
  int64_t grid_h, grid_w;
  T count;  // samples per bin, at least 1
};

template <typename T>
inline RoiGeometry<T> roi_geometry(
    const T* roi, T scale, int64_t ph, int64_t pw, int64_t sampling_ratio, bool aligned) {
  const T offset = aligned ? T(0.5) : T(0);
  RoiGeometry<T> g;
  g.start_x = roi[1] * scale - offset;
  g.start_y = roi[2] * scale - offset;
  T rw = roi[3] * scale - offset - g.start_x;
  T rh = roi[4] * scale - offset - g.start_y;
  if (!aligned) {
    rw = rw > T(1) ? rw : T(1);
    rh = rh > T(1) ? rh : T(1);
  }
  g.bin_h = rh / static_cast<T>(ph);
  g.bin_w = rw / static_cast<T>(pw);
  g.grid_h = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(ceil(rh / static_cast<T>(ph)));
  g.grid_w = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(ceil(rw / static_cast<T>(pw)));
  const int64_t n = g.grid_h * g.grid_w;
  g.count = static_cast<T>(n > 1 ? n : 1);
  return g;
}

// One bilinear tap along an axis: the low/high neighbours and their weights
// (both zero when the sample lies outside [-1, size]).
template <typename T>
struct AxisTap {
  int64_t low, high;
  T w_low, w_high;
};

template <typename T>
inline AxisTap<T> axis_tap(T coord, int64_t size) {
  AxisTap<T> t{0, 0, T(0), T(0)};
  if (coord < T(-1) || coord > static_cast<T>(size)) return t;
  if (coord < T(0)) coord = T(0);
  int64_t low = static_cast<int64_t>(coord);
  if (low >= size - 1) {
    low = size - 1;
    coord = static_cast<T>(low);
    t.high = low;
  } else {
    t.high = low + 1;
  }
  t.low = low;
  const T frac = coord - static_cast<T>(low);
  t.w_low = T(1) - frac;
  t.w_high = frac;
  return t;
}

// Sample i of bin p along an axis.
template <typename T>
inline T sample_coord(T start, T bin, int64_t p, int64_t i, int64_t grid) {
  const T g = static_cast<T>(grid > 1 ? grid : 1);
  return (start + static_cast<T>(p) * bin) + (static_cast<T>(i) + T(0.5)) * bin / g;
}

}  // namespace streamseg
