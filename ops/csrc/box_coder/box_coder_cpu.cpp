// CPU box decoding, parallel over boxes.
#include "box_coder.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>

namespace streamseg {

at::Tensor decode_boxes_cpu(
    const at::Tensor& deltas_in, const at::Tensor& boxes_in, double wx, double wy, double ww,
    double wh, double clamp) {
  TORCH_CHECK(
      deltas_in.dim() == 2 && deltas_in.size(1) % 4 == 0, "deltas must be (N, 4k), got ",
      deltas_in.sizes());
  TORCH_CHECK(
      boxes_in.dim() == 2 && boxes_in.size(1) == 4 && boxes_in.size(0) == deltas_in.size(0),
      "boxes must be (N, 4) with N rows of deltas, got ", boxes_in.sizes());
  const int64_t n = deltas_in.size(0), k = deltas_in.size(1) / 4;
  const at::Tensor deltas = deltas_in.contiguous();
  const at::Tensor boxes = boxes_in.to(deltas.scalar_type()).contiguous();
  at::Tensor out = at::empty({n, k, 4}, deltas.options());
  AT_DISPATCH_FLOATING_TYPES(deltas.scalar_type(), "streamseg_decode_boxes", [&] {
    const DecodeParams<scalar_t> p{
        static_cast<scalar_t>(wx), static_cast<scalar_t>(wy), static_cast<scalar_t>(ww),
        static_cast<scalar_t>(wh), static_cast<scalar_t>(clamp)};
    const scalar_t* d = deltas.const_data_ptr<scalar_t>();
    const scalar_t* b = boxes.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    // About 2048 decodes per task, whatever the class count.
    const int64_t grain = std::max<int64_t>(1, 2048 / std::max<int64_t>(k, 1));
    at::parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t j = 0; j < k; ++j) decode_one(b + 4 * i, d + 4 * (i * k + j), p, o + 4 * (i * k + j));
    });
  });
  return out;
}

}  // namespace streamseg
