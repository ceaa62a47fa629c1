"""Brute-force ``expected_fn``s: plain Python loops in float64, written from the
torchvision kernels' rules, independent of the vectorised references."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = area_a + area_b - inter
    if union == 0:
        return math.nan
    return inter / union


def box_iou(a: Tensor, b: Tensor) -> Tensor:
    la, lb = a.double().tolist(), b.double().tolist()
    return torch.tensor([[iou(x, y) for y in lb] for x in la], dtype=torch.float64).reshape(
        len(la), len(lb)
    )


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor | None, thr: float) -> list[int]:
    b = boxes.double().tolist()
    s = scores.double().tolist()
    c = idxs.tolist() if idxs is not None else [0] * len(b)
    order = sorted(range(len(b)), key=lambda i: -s[i])  # sorted() is stable
    removed = [False] * len(b)
    keep = []
    for pos, i in enumerate(order):
        if removed[i]:
            continue
        keep.append(i)
        for j in order[pos + 1 :]:
            if c[j] == c[i] and iou(b[i], b[j]) > thr:
                removed[j] = True
    return keep


def _bilinear(feat: list[list[float]], h: int, w: int, y: float, x: float) -> float:
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    return (
        hy * hx * feat[y0][x0]
        + hy * lx * feat[y0][x1]
        + ly * hx * feat[y1][x0]
        + ly * lx * feat[y1][x1]
    )


def roi_align(
    input: Tensor,
    rois: Tensor,
    output_size: tuple[int, int],
    scale: float,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    _, c, h, w = input.shape
    ph, pw = output_size
    feats = input.double().tolist()
    out = torch.zeros(rois.shape[0], c, ph, pw, dtype=torch.float64)
    for r, roi in enumerate(rois.double().tolist()):
        b = int(roi[0])
        off = 0.5 if aligned else 0.0
        x1, y1 = roi[1] * scale - off, roi[2] * scale - off
        rw, rh = roi[3] * scale - off - x1, roi[4] * scale - off - y1
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / ph)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / pw)
        count = max(gh * gw, 1)
        for ch in range(c):
            for i in range(ph):
                for j in range(pw):
                    acc = 0.0
                    for iy in range(gh):
                        y = y1 + i * bh + (iy + 0.5) * bh / gh
                        for ix in range(gw):
                            x = x1 + j * bw + (ix + 0.5) * bw / gw
                            acc += _bilinear(feats[b][ch], h, w, y, x)
                    out[r, ch, i, j] = acc / count
    return out


def level_of(box: Sequence[float], k_min: int, k_max: int, s0: float = 224, l0: float = 4) -> int:
    area = (box[2] - box[0]) * (box[3] - box[1])
    if area < 0:
        return -1
    if area == 0:
        return 0
    lvl = math.floor(l0 + math.log2(math.sqrt(area) / s0) + 1e-6)
    return min(max(lvl, k_min), k_max) - k_min


def _resize_1d(dst: int, in_size: int, out_size: int) -> tuple[int, int, float]:
    src = max((dst + 0.5) * (in_size / out_size) - 0.5, 0.0)
    i0 = min(int(src), in_size - 1)
    i1 = i0 + 1 if i0 < in_size - 1 else i0
    return i0, i1, src - i0


def paste_masks(masks: Tensor, boxes: Tensor, image_size: tuple[int, int], padding: int) -> Tensor:
    n, m, _ = masks.shape
    h, w = image_size
    out = torch.zeros(n, h, w, dtype=torch.float64)
    scale = (m + 2 * padding) / m
    mp = m + 2 * padding
    for k in range(n):
        pad = [[0.0] * mp for _ in range(mp)]
        for i in range(m):
            for j in range(m):
                pad[i + padding][j + padding] = float(masks[k, i, j])
        bx = [float(v) for v in boxes[k]]
        wh, hh = (bx[2] - bx[0]) * 0.5 * scale, (bx[3] - bx[1]) * 0.5 * scale
        xc, yc = (bx[2] + bx[0]) * 0.5, (bx[3] + bx[1]) * 0.5
        x0, x1 = int(xc - wh), int(xc + wh)
        y0, y1 = int(yc - hh), int(yc + hh)
        bw, bh = max(x1 - x0 + 1, 1), max(y1 - y0 + 1, 1)
        for y in range(max(y0, 0), min(y1 + 1, h)):
            r0, r1, ly = _resize_1d(y - y0, mp, bh)
            for x in range(max(x0, 0), min(x1 + 1, w)):
                c0, c1, lx = _resize_1d(x - x0, mp, bw)
                top = (1 - lx) * pad[r0][c0] + lx * pad[r0][c1]
                bottom = (1 - lx) * pad[r1][c0] + lx * pad[r1][c1]
                out[k, y, x] = (1 - ly) * top + ly * bottom
    return out


def decode(deltas: Tensor, boxes: Tensor, weights: Sequence[float], clamp: float) -> Tensor:
    n = boxes.shape[0]
    k = deltas.shape[1] // 4
    out = torch.zeros(n, k, 4, dtype=torch.float64)
    for i in range(n):
        x1, y1, x2, y2 = (float(v) for v in boxes[i])
        bw, bh = x2 - x1, y2 - y1
        cx, cy = x1 + 0.5 * bw, y1 + 0.5 * bh
        for j in range(k):
            dx, dy, dw, dh = (
                float(v) / wt for v, wt in zip(deltas[i, 4 * j : 4 * j + 4], weights, strict=True)
            )
            dw, dh = min(dw, clamp), min(dh, clamp)
            px, py = dx * bw + cx, dy * bh + cy
            pw, ph = math.exp(dw) * bw, math.exp(dh) * bh
            out[i, j] = torch.tensor([px - pw / 2, py - ph / 2, px + pw / 2, py + ph / 2])
    return out


def encode(reference: Tensor, proposals: Tensor, weights: Sequence[float]) -> Tensor:
    out = torch.zeros(reference.shape[0], 4, dtype=torch.float64)
    for i in range(reference.shape[0]):
        g = [float(v) for v in reference[i]]
        p = [float(v) for v in proposals[i]]
        pw, ph, gw, gh = p[2] - p[0], p[3] - p[1], g[2] - g[0], g[3] - g[1]
        out[i, 0] = weights[0] * ((g[0] + gw / 2) - (p[0] + pw / 2)) / pw
        out[i, 1] = weights[1] * ((g[1] + gh / 2) - (p[1] + ph / 2)) / ph
        out[i, 2] = weights[2] * math.log(gw / pw)
        out[i, 3] = weights[3] * math.log(gh / ph)
    return out


def rle_counts(mask: Tensor) -> list[int]:
    h, w = mask.shape
    counts: list[int] = []
    current, run = 0, 0
    for x in range(w):
        for y in range(h):
            v = int(mask[y, x])
            if v != current:
                counts.append(run)
                current, run = v, 0
            run += 1
    counts.append(run)
    return counts
