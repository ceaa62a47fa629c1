// Paste per-box mask probabilities into the frame (torchvision's
// paste_masks_in_image): each (M, M) mask is padded by `padding` zeros,
// resized bilinearly (align_corners=False, as F.interpolate) onto its box
// expanded by (M + 2 padding) / M and truncated to integers, and written
// where that box overlaps the (height, width) frame; 0 elsewhere.
// masks (N, M, M) float, boxes (N, 4) float xyxy -> (N, height, width).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace streamseg {

// Integer boxes (N * 4, inclusive x0 y0 x1 y1) computed on the CPU.
std::vector<int64_t> paste_boxes_cpu(const at::Tensor& boxes, int64_t mask_size, int64_t padding);

at::Tensor paste_masks_cpu(
    const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
    int64_t padding);

// The same paste thresholded on the fly: (N, height, width) bool, equal to
// paste_masks(...) > threshold.
at::Tensor paste_masks_binary_cpu(
    const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
    int64_t padding, double threshold);

// Shapes and sizes every paste entry point accepts.
inline void check_paste_args(
    const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
    int64_t padding) {
  TORCH_CHECK(
      masks.dim() == 3 && masks.size(1) == masks.size(2),
      "masks must be (N, M, M), got ", masks.sizes());
  TORCH_CHECK(
      boxes.dim() == 2 && boxes.size(1) == 4 && boxes.size(0) == masks.size(0),
      "boxes must be (N, 4) with N masks, got ", boxes.sizes());
  TORCH_CHECK(padding >= 0 && height >= 0 && width >= 0, "padding and frame size must be >= 0");
}

// The integer box (x0, y0, x1, y1), inclusive, the padded mask covers.
// Returns false for a box with non-finite coordinates (nothing is pasted).
template <typename T>
inline bool paste_box(const T* box, T scale, int64_t* out) {
  const T half_w = (box[2] - box[0]) * T(0.5) * scale;
  const T half_h = (box[3] - box[1]) * T(0.5) * scale;
  const T cx = (box[2] + box[0]) * T(0.5);
  const T cy = (box[3] + box[1]) * T(0.5);
  const T v[4] = {cx - half_w, cy - half_h, cx + half_w, cy + half_h};
  // Half and bfloat16 widen to float, float and double stay as they are.
  using wide_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int i = 0; i < 4; ++i) {
    const wide_t x = static_cast<wide_t>(v[i]);
    if (!(x > wide_t(-4e18) && x < wide_t(4e18))) return false;
    out[i] = static_cast<int64_t>(x);  // truncation toward zero, as .to(int64)
  }
  return true;
}

// F.interpolate's (bilinear, align_corners=False) source taps of output
// index dst when resizing in_size -> out_size.
template <typename T>
struct ResizeTap {
  int64_t i0, i1;
  T w0, w1;
};

template <typename T>
inline ResizeTap<T> resize_tap(int64_t dst, int64_t in_size, int64_t out_size) {
  const T scale = static_cast<T>(in_size) / static_cast<T>(out_size);
  T src = scale * (static_cast<T>(dst) + T(0.5)) - T(0.5);
  if (src < T(0)) src = T(0);
  int64_t i0 = static_cast<int64_t>(floor(src));
  if (i0 > in_size - 1) i0 = in_size - 1;
  T lambda = src - static_cast<T>(i0);
  lambda = lambda < T(0) ? T(0) : (lambda > T(1) ? T(1) : lambda);
  ResizeTap<T> t;
  t.i0 = i0;
  t.i1 = i0 < in_size - 1 ? i0 + 1 : i0;
  t.w1 = lambda;
  t.w0 = T(1) - lambda;
  return t;
}

}  // namespace streamseg
