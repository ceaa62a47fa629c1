// Box decoding (torchvision's BoxCoder.decode).
//
// deltas (N, 4k) (dx, dy, dw, dh) per class, boxes (N, 4) xyxy ->
// (N, k, 4) xyxy. dx, dy, dw, dh are divided by the weights (wx, wy, ww, wh);
// dw and dh are clamped from above at `clamp` before exp.
#pragma once

#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>

namespace streamseg {

at::Tensor decode_boxes_cpu(
    const at::Tensor& deltas, const at::Tensor& boxes, double wx, double wy, double ww,
    double wh, double clamp);

template <typename T>
struct DecodeParams {
  T wx, wy, ww, wh, clamp;
};

// exp in T's own precision (std::exp's float overload; a bare exp(float)
// would be C's double exp).
template <typename T>
inline T exp_of(T x) {
  return std::exp(x);
}

// Decode one (dx, dy, dw, dh) against one box, with the reference's
// operation order.
template <typename T>
inline void decode_one(const T* box, const T* d, const DecodeParams<T>& p, T* out) {
  const T width = box[2] - box[0];
  const T height = box[3] - box[1];
  const T ctr_x = box[0] + T(0.5) * width;
  const T ctr_y = box[1] + T(0.5) * height;
  T dw = d[2] / p.ww;
  T dh = d[3] / p.wh;
  dw = dw > p.clamp ? p.clamp : dw;
  dh = dh > p.clamp ? p.clamp : dh;
  const T px = (d[0] / p.wx) * width + ctr_x;
  const T py = (d[1] / p.wy) * height + ctr_y;
  const T half_w = T(0.5) * (exp_of(dw) * width);
  const T half_h = T(0.5) * (exp_of(dh) * height);
  out[0] = px - half_w;
  out[1] = py - half_h;
  out[2] = px + half_w;
  out[3] = py + half_h;
}

}  // namespace streamseg
