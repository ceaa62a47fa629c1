// CPU mask paste, parallel over masks. The output is cleared first by
// torch's fill, then each task writes only its mask's box (a few percent of
// the frame). The binary variant thresholds as it pastes and writes one
// byte per pixel instead of a float.
#include "paste_masks.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace streamseg {
namespace {

// What one pasted value becomes: the probability itself (out_t = scalar_t),
// or whether it passes `threshold` (out_t = bool), compared in scalar_t as
// `paste_masks(...) > threshold` would compare it.
template <typename scalar_t, typename out_t>
struct Store {
  using acc_t = at::opmath_type<scalar_t>;
  acc_t threshold;
  out_t operator()(acc_t v) const {
    if constexpr (std::is_same_v<out_t, bool>) {
      return static_cast<acc_t>(static_cast<scalar_t>(v)) > threshold;
    } else {
      return static_cast<out_t>(v);
    }
  }
};

// Writes each mask's box into `out`, which already holds `store(0)`
// everywhere (the value outside every box).
template <typename scalar_t, typename out_t>
void paste_kernel(
    const at::Tensor& masks, const int64_t* int_boxes, at::Tensor& out, int64_t padding,
    Store<scalar_t, out_t> store) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t n = masks.size(0), m = masks.size(1), mp = m + 2 * padding;
  const int64_t h = out.size(1), w = out.size(2);
  const scalar_t* ms = masks.const_data_ptr<scalar_t>();
  out_t* o = out.mutable_data_ptr<out_t>();
  at::parallel_for(0, n, 1, [&](int64_t lo, int64_t hi) {
    std::vector<acc_t> padded(static_cast<size_t>(mp * mp));
    std::vector<ResizeTap<acc_t>> xs;
    for (int64_t k = lo; k < hi; ++k) {
      out_t* plane = o + k * h * w;
      const int64_t* ib = int_boxes + 4 * k;
      const int64_t fx0 = std::max<int64_t>(ib[0], 0), fy0 = std::max<int64_t>(ib[1], 0);
      const int64_t fx1 = std::min<int64_t>(ib[2] + 1, w), fy1 = std::min<int64_t>(ib[3] + 1, h);
      if (fx1 <= fx0 || fy1 <= fy0) continue;
      const int64_t out_w = std::max<int64_t>(ib[2] - ib[0] + 1, 1);
      const int64_t out_h = std::max<int64_t>(ib[3] - ib[1] + 1, 1);
      std::fill(padded.begin(), padded.end(), acc_t(0));
      const scalar_t* src = ms + k * m * m;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < m; ++j)
          padded[(i + padding) * mp + j + padding] = static_cast<acc_t>(src[i * m + j]);
      xs.resize(static_cast<size_t>(fx1 - fx0));
      for (int64_t x = fx0; x < fx1; ++x) xs[x - fx0] = resize_tap<acc_t>(x - ib[0], mp, out_w);
      for (int64_t y = fy0; y < fy1; ++y) {
        out_t* row = plane + y * w;
        const ResizeTap<acc_t> ty = resize_tap<acc_t>(y - ib[1], mp, out_h);
        const acc_t* r0 = padded.data() + ty.i0 * mp;
        const acc_t* r1 = padded.data() + ty.i1 * mp;
        for (int64_t x = fx0; x < fx1; ++x) {
          const ResizeTap<acc_t>& tx = xs[x - fx0];
          const acc_t top = r0[tx.i0] * tx.w0 + r0[tx.i1] * tx.w1;
          const acc_t bottom = r1[tx.i0] * tx.w0 + r1[tx.i1] * tx.w1;
          row[x] = store(top * ty.w0 + bottom * ty.w1);
        }
      }
    }
  });
}

}  // namespace

std::vector<int64_t> paste_boxes_cpu(const at::Tensor& boxes_in, int64_t mask_size, int64_t padding) {
  const at::Tensor boxes = boxes_in.contiguous();
  const int64_t n = boxes.size(0);
  std::vector<int64_t> out(static_cast<size_t>(4 * n));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, boxes.scalar_type(), "streamseg_paste_boxes", [&] {
        const scalar_t* b = boxes.const_data_ptr<scalar_t>();
        const double scale = static_cast<double>(mask_size + 2 * padding) / mask_size;
        for (int64_t k = 0; k < n; ++k) {
          // In the boxes' own dtype, as the reference computes it.
          if (!paste_box<scalar_t>(b + 4 * k, static_cast<scalar_t>(scale), &out[4 * k])) {
            const int64_t none[4] = {0, 0, -1, -1};  // pastes nothing
            std::copy(none, none + 4, &out[4 * k]);
          }
        }
      });
  return out;
}

at::Tensor paste_masks_cpu(
    const at::Tensor& masks_in, const at::Tensor& boxes_in, int64_t height, int64_t width,
    int64_t padding) {
  check_paste_args(masks_in, boxes_in, height, width, padding);
  // Cleared by torch's own (parallel, vectorised) fill: most of the frame is
  // outside every box, and the kernel then writes only the boxes.
  at::Tensor out = at::zeros({masks_in.size(0), height, width}, masks_in.options());
  if (out.numel() == 0) return out;
  TORCH_CHECK(masks_in.size(1) > 0, "masks must not be empty");
  const at::Tensor masks = masks_in.contiguous();
  const std::vector<int64_t> int_boxes = paste_boxes_cpu(boxes_in, masks.size(1), padding);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "streamseg_paste_masks", [&] {
        paste_kernel<scalar_t, scalar_t>(masks, int_boxes.data(), out, padding, {});
      });
  return out;
}

at::Tensor paste_masks_binary_cpu(
    const at::Tensor& masks_in, const at::Tensor& boxes_in, int64_t height, int64_t width,
    int64_t padding, double threshold) {
  check_paste_args(masks_in, boxes_in, height, width, padding);
  const at::TensorOptions options = masks_in.options().dtype(at::kBool);
  if (masks_in.size(0) * height * width == 0) {
    return at::empty({masks_in.size(0), height, width}, options);
  }
  TORCH_CHECK(masks_in.size(1) > 0, "masks must not be empty");
  const at::Tensor masks = masks_in.contiguous();
  const std::vector<int64_t> int_boxes = paste_boxes_cpu(boxes_in, masks.size(1), padding);
  at::Tensor out;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "streamseg_paste_masks_binary", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        // The threshold as the reference compares it: a Python float against
        // a scalar_t tensor is rounded to scalar_t first.
        const Store<scalar_t, bool> store{static_cast<acc_t>(static_cast<scalar_t>(threshold))};
        // Outside every box the probability is 0: false unless the threshold is below it.
        out = at::full({masks.size(0), height, width}, store(acc_t(0)), options);
        paste_kernel<scalar_t, bool>(masks, int_boxes.data(), out, padding, store);
      });
  return out;
}

}  // namespace streamseg
