"""Mask2Former's training loss: Hungarian matching on sampled points.

For every decoder prediction (the query-initialisation one and one per
masked-attention layer: deep supervision) the queries are matched one-to-one
with the ground-truth instances by ``scipy.optimize.linear_sum_assignment``
on the cost ``class_weight * -p(class) + mask_weight * BCE + dice_weight *
dice``, with BCE and dice measured on ``num_points`` random points shared by
all pairs. Matched queries then get

* a sigmoid BCE and a dice loss on ``num_points`` points per mask, chosen
  by uncertainty (``importance_sample_ratio`` of them among the
  ``oversample_ratio * num_points`` random points whose logits are closest to
  0, the rest uniformly at random);
* a cross-entropy towards their class, while unmatched queries learn "no
  object" with weight ``no_object_weight``.

Mask losses are normalised by the number of ground-truth instances, averaged
over the processes of a distributed run.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import Tensor, nn

__all__ = ["SetCriterion", "Target", "sample_points"]

# (labels int64 (N,) in 0..K-1, masks float (N, H, W) on the padded input)
Target = tuple[Tensor, Tensor]


def sample_points(masks: Tensor, points: Tensor) -> Tensor:
    """Bilinear values of ``masks (N, H, W)`` at ``points (N, P, 2)`` xy in [0, 1] -> ``(N, P)``."""
    grid = (2.0 * points - 1.0)[:, :, None]
    return F.grid_sample(masks[:, None], grid, mode="bilinear", align_corners=False)[:, 0, :, 0]


def _pairwise_bce(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean BCE of each ``logits (Q, P)`` row vs each ``targets (N, P)`` row: ``(Q, N)``."""
    pos = F.softplus(-logits)  # -log(sigmoid(x))
    neg = F.softplus(logits)  # -log(1 - sigmoid(x))
    return (pos @ targets.T + neg @ (1 - targets).T) / logits.shape[1]


def _pairwise_dice(logits: Tensor, targets: Tensor) -> Tensor:
    probs = logits.sigmoid()
    inter = probs @ targets.T
    total = probs.sum(-1)[:, None] + targets.sum(-1)[None, :]
    return 1 - (2 * inter + 1) / (total + 1)


class SetCriterion(nn.Module):
    """Matching + losses; ``empty_weight`` keeps transformers' key ``criterion.empty_weight``.

    Args:
        num_classes: object classes ``K`` (the "no object" class is ``K``).
        num_points: points per mask for matching and for the mask losses.
        no_object_weight: class-loss weight of "no object".
        class_weight / mask_weight / dice_weight: loss and matching-cost weights.
        oversample_ratio / importance_sample_ratio: uncertainty point sampling.
    """

    def __init__(
        self,
        num_classes: int,
        *,
        num_points: int = 12544,
        no_object_weight: float = 0.1,
        class_weight: float = 2.0,
        mask_weight: float = 5.0,
        dice_weight: float = 5.0,
        oversample_ratio: float = 3.0,
        importance_sample_ratio: float = 0.75,
    ) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.num_points = num_points
        self.class_weight = class_weight
        self.mask_weight = mask_weight
        self.dice_weight = dice_weight
        self.oversample_ratio = oversample_ratio
        self.importance_sample_ratio = importance_sample_ratio
        weight = torch.ones(num_classes + 1)
        weight[-1] = no_object_weight
        self.empty_weight: Tensor
        self.register_buffer("empty_weight", weight)

    def forward(
        self, predictions: Sequence[tuple[Tensor, Tensor]], targets: Sequence[Target]
    ) -> dict[str, Tensor]:
        """Weighted losses summed over all decoder predictions.

        Args:
            predictions: per decoder layer ``(class_logits (B, Q, K+1),
                mask_logits (B, Q, h, w))``.
            targets: per image ``(labels, masks)``, see :data:`Target`.

        Returns:
            ``{"loss_class", "loss_mask", "loss_dice"}`` scalars.
        """
        num_masks = self._num_masks(targets, predictions[0][0].device)
        out: dict[str, Tensor] = {}
        # The last layer first, then the auxiliary ones: the same order of
        # random draws as transformers' Mask2FormerLoss (a test compares them).
        for class_logits, mask_logits in [predictions[-1], *predictions[:-1]]:
            matches = self.match(class_logits, mask_logits, targets)
            ce = self._class_loss(class_logits, targets, matches)
            bce, dice = self._mask_losses(mask_logits, targets, matches, num_masks)
            for key, value in (("loss_class", ce), ("loss_mask", bce), ("loss_dice", dice)):
                out[key] = out[key] + value if key in out else value
        weights = {
            "loss_class": self.class_weight,
            "loss_mask": self.mask_weight,
            "loss_dice": self.dice_weight,
        }
        return {k: out[k] * w for k, w in weights.items()}

    @torch.no_grad()
    def match(
        self, class_logits: Tensor, mask_logits: Tensor, targets: Sequence[Target]
    ) -> list[tuple[Tensor, Tensor]]:
        """Per image ``(query indices, target indices)``, int64 on the logits' device."""
        matches = []
        for b, (labels, masks) in enumerate(targets):
            device = class_logits.device
            if len(labels) == 0:
                empty = torch.zeros(0, dtype=torch.int64, device=device)
                matches.append((empty, empty))
                continue
            cost_class = -class_logits[b].float().softmax(-1)[:, labels]
            points = torch.rand(1, self.num_points, 2, device=device)
            pred = sample_points(
                mask_logits[b].float(), points.expand(mask_logits.shape[1], -1, -1)
            )
            tgt = sample_points(masks.float(), points.expand(len(labels), -1, -1))
            cost = (
                self.class_weight * cost_class
                + self.mask_weight * _pairwise_bce(pred, tgt)
                + self.dice_weight * _pairwise_dice(pred, tgt)
            )
            big = torch.finfo(cost.dtype).max
            cost = torch.nan_to_num(cost, nan=big, posinf=big, neginf=big)
            rows, cols = linear_sum_assignment(cost.cpu().numpy())
            matches.append(
                (
                    torch.as_tensor(rows, dtype=torch.int64, device=device),
                    torch.as_tensor(cols, dtype=torch.int64, device=device),
                )
            )
        return matches

    def _class_loss(
        self,
        class_logits: Tensor,
        targets: Sequence[Target],
        matches: list[tuple[Tensor, Tensor]],
    ) -> Tensor:
        wanted = torch.full(
            class_logits.shape[:2], self.num_classes, dtype=torch.int64, device=class_logits.device
        )
        for b, ((labels, _), (rows, cols)) in enumerate(zip(targets, matches, strict=True)):
            wanted[b, rows] = labels[cols]
        return F.cross_entropy(
            class_logits.float().transpose(1, 2), wanted, weight=self.empty_weight.float()
        )

    def _mask_losses(
        self,
        mask_logits: Tensor,
        targets: Sequence[Target],
        matches: list[tuple[Tensor, Tensor]],
        num_masks: Tensor,
    ) -> tuple[Tensor, Tensor]:
        pred = torch.cat([mask_logits[b, rows] for b, (rows, _) in enumerate(matches)])
        if pred.shape[0] == 0:
            zero = mask_logits.sum() * 0.0
            return zero, zero
        tgt = torch.cat(
            [masks[cols] for (_, masks), (_, cols) in zip(targets, matches, strict=True)]
        )
        pred = pred.float()
        with torch.no_grad():
            points = self._uncertain_points(pred)
            point_labels = sample_points(tgt.float(), points)
        point_logits = sample_points(pred, points)
        bce = F.binary_cross_entropy_with_logits(point_logits, point_labels, reduction="none")
        probs = point_logits.sigmoid()
        dice = 1 - (2 * (probs * point_labels).sum(-1) + 1) / (
            probs.sum(-1) + point_labels.sum(-1) + 1
        )
        return bce.mean(1).sum() / num_masks, dice.sum() / num_masks

    def _uncertain_points(self, logits: Tensor) -> Tensor:
        """``(M, num_points, 2)`` points, most near the mask boundary (logit ~ 0)."""
        m = logits.shape[0]
        oversampled = int(self.num_points * self.oversample_ratio)
        candidates = torch.rand(m, oversampled, 2, device=logits.device)
        uncertainty = -sample_points(logits, candidates).abs()
        num_uncertain = int(self.importance_sample_ratio * self.num_points)
        idx = uncertainty.topk(num_uncertain, dim=1).indices
        chosen = torch.gather(candidates, 1, idx[..., None].expand(-1, -1, 2))
        rest = torch.rand(m, self.num_points - num_uncertain, 2, device=logits.device)
        return torch.cat([chosen, rest], dim=1)

    @staticmethod
    def _num_masks(targets: Sequence[Target], device: torch.device) -> Tensor:
        n = torch.tensor(float(sum(len(labels) for labels, _ in targets)), device=device)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(n)
            n = n / torch.distributed.get_world_size()
        return n.clamp(min=1.0)
