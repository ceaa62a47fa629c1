// The streamseg custom ops: schemas and the CPU kernels behind them. Fake
// (meta) kernels and autograd are registered from Python
// (streamseg/ops/_fake.py). CUDA tensors go to the Triton kernels in
// streamseg/ops/triton, registered as torch.ops.streamseg_triton.
#include <torch/library.h>

#include "box_coder/box_coder.h"
#include "nms/nms.h"
#include "paste_masks/paste_masks.h"
#include "rle/rle.h"
#include "roi_align/roi_align.h"

TORCH_LIBRARY(streamseg, m) {
  m.def("nms(Tensor boxes, Tensor scores, float iou_threshold) -> Tensor");
  m.def("batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor");
  m.def("box_overlap_pairs(Tensor a, Tensor b) -> (Tensor, Tensor, Tensor)");
  m.def(
      "roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
      "int pooled_width, int sampling_ratio, bool aligned) -> Tensor");
  m.def(
      "roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, int pooled_height, "
      "int pooled_width, int batch_size, int channels, int height, int width, "
      "int sampling_ratio, bool aligned) -> Tensor");
  m.def("paste_masks(Tensor masks, Tensor boxes, int height, int width, int padding) -> Tensor");
  m.def(
      "paste_masks_binary(Tensor masks, Tensor boxes, int height, int width, int padding, "
      "float threshold) -> Tensor");
  m.def("mask_to_rle(Tensor masks) -> (Tensor, Tensor)");
  m.def("crops_to_rle(Tensor[] crops, Tensor boxes, int height, int width) -> (Tensor, Tensor)");
  m.def(
      "decode_boxes(Tensor deltas, Tensor boxes, float wx, float wy, float ww, float wh, "
      "float clamp) -> Tensor");
}

TORCH_LIBRARY_IMPL(streamseg, CPU, m) {
  m.impl("nms", &streamseg::nms_cpu);
  m.impl("batched_nms", &streamseg::batched_nms_cpu);
  m.impl("box_overlap_pairs", &streamseg::box_overlap_pairs_cpu);
  m.impl("roi_align", &streamseg::roi_align_forward_cpu);
  m.impl("roi_align_backward", &streamseg::roi_align_backward_cpu);
  m.impl("paste_masks", &streamseg::paste_masks_cpu);
  m.impl("paste_masks_binary", &streamseg::paste_masks_binary_cpu);
  m.impl("mask_to_rle", &streamseg::mask_to_rle_cpu);
  m.impl("crops_to_rle", &streamseg::crops_to_rle_cpu);
  m.impl("decode_boxes", &streamseg::decode_boxes_cpu);
}

