// COCO compressed RLE of bool masks.
//
// masks (N, h, w) bool -> (chars uint8 (total,), lengths int64 (N,)): the
// COCO "counts" strings of all masks concatenated, and each one's length.
// Runs are read column-major and start with a (possibly empty) run of
// zeros; from the third run on each count is stored as the difference to
// the count two before, in little-endian 5-bit groups, each a character
// 48 + bits with 0x20 set on all but the last group (pycocotools' rleToString).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace streamseg {

std::tuple<at::Tensor, at::Tensor> mask_to_rle_cpu(const at::Tensor& masks);

// Box-local crops -> the frame-size masks' strings, as mask_to_rle gives
// them: crops[i] bool (or 0/1 bytes) (y1 - y0, x1 - x0) at boxes[i]
// (int64 x0, y0, x1, y1, exclusive ends, inside the height x width frame),
// zero elsewhere. Only the crops' pixels are read.
std::tuple<at::Tensor, at::Tensor> crops_to_rle_cpu(
    at::TensorList crops, const at::Tensor& boxes, int64_t height, int64_t width);

// Append the COCO string of run lengths `counts` to `out`.
inline void append_coco_string(const std::vector<int64_t>& counts, std::string& out) {
  out.reserve(out.size() + 4 * counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    int64_t x = counts[i];
    if (i > 2) x -= counts[i - 2];
    bool more = true;
    while (more) {
      int64_t c = x & 0x1f;
      x >>= 5;  // arithmetic shift
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c |= 0x20;
      out.push_back(static_cast<char>(c + 48));
    }
  }
}

// Pack per-mask strings into the (chars, lengths) pair the op returns.
std::tuple<at::Tensor, at::Tensor> pack_strings(const std::vector<std::string>& strings);

}  // namespace streamseg
