// CUDA mask -> COCO RLE: a kernel marks, in column-major order, every pixel
// that differs from the one before it; the positions of the marks are the
// run boundaries, copied to the host where the strings are written.
#include "rle.h"

#include "../cuda_common.cuh"

#include <ATen/ops/empty.h>
#include <ATen/ops/nonzero.h>

namespace streamseg {
namespace {

__global__ void boundaries_kernel(
    int64_t total, const bool* masks, int64_t h, int64_t w, uint8_t* flags) {
  // Threads walk the masks row-major (coalesced reads).
  STREAMSEG_GRID_LOOP(idx, total) {
    const int64_t x = idx % w;
    const int64_t y = (idx / w) % h;
    const int64_t k = idx / (w * h);
    const bool* mask = masks + k * h * w;
    bool prev = false;
    if (y > 0) {
      prev = mask[(y - 1) * w + x];
    } else if (x > 0) {
      prev = mask[(h - 1) * w + x - 1];
    }
    flags[k * h * w + x * h + y] = mask[y * w + x] != prev;
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> mask_to_rle_cuda(const at::Tensor& masks_in) {
  TORCH_CHECK(masks_in.is_cuda(), "masks must be a CUDA tensor");
  TORCH_CHECK(masks_in.dim() == 3, "masks must be (N, h, w), got ", masks_in.sizes());
  TORCH_CHECK(
      masks_in.scalar_type() == at::kBool || masks_in.scalar_type() == at::kByte,
      "masks must be bool, got ", masks_in.scalar_type());
  c10::cuda::CUDAGuard guard(masks_in.device());
  const at::Tensor masks =
      masks_in.scalar_type() == at::kBool ? masks_in.contiguous() : masks_in.ne(0).contiguous();
  const int64_t n = masks.size(0), h = masks.size(1), w = masks.size(2);
  const int64_t total = masks.numel();
  at::Tensor flags = at::empty({n, h * w}, masks.options().dtype(at::kByte));
  if (total > 0) {
    auto stream = c10::cuda::getCurrentCUDAStream();
    boundaries_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
        total, masks.const_data_ptr<bool>(), h, w, flags.mutable_data_ptr<uint8_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // (mask, position) of every boundary, ordered by mask then position.
  const at::Tensor marks = at::nonzero(flags).cpu().contiguous();
  const int64_t* mk = marks.const_data_ptr<int64_t>();
  const int64_t count = marks.size(0);
  std::vector<std::string> strings(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  int64_t row = 0;
  for (int64_t k = 0; k < n; ++k) {
    counts.clear();
    int64_t start = 0;
    for (; row < count && mk[2 * row] == k; ++row) {
      counts.push_back(mk[2 * row + 1] - start);
      start = mk[2 * row + 1];
    }
    counts.push_back(h * w - start);
    append_coco_string(counts, strings[k]);
  }
  return pack_strings(strings);
}

}  // namespace streamseg
