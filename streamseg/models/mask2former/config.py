"""Hugging Face ``Mask2FormerConfig`` objects for the backbones streamseg builds.

The network itself is transformers' ``Mask2FormerModel``; these configs pick
its sizes. ``swin_t`` matches ``facebook/mask2former-swin-tiny-coco-instance``
(Swin-T: embed 96, depths 2-2-6-2, heads 3-6-12-24, window 7); ``r50`` is a
ResNet-50 with the stride in the 3x3 convolution, as Mask2Former's R50 model
uses; ``tiny`` (Swin) and ``tiny_r50`` (ResNet with R50's block layout) are
few-channel models for tests (seconds on a CPU); ``small`` is the
decoder size of ``mask2former_small`` (64 channels, three masked-attention
layers), whose backbone (``maskrcnn_small``'s ResNet trunk, ``small.py``)
replaces the placeholder ResNet this config describes.
"""

from __future__ import annotations

import logging
from typing import Any

from streamseg.errors import StartupError

__all__ = ["BACKBONES", "MissingTransformersError", "hf_config"]

BACKBONES = ("r50", "swin_t", "tiny", "tiny_r50", "small")


class MissingTransformersError(StartupError, ImportError):
    """The ``mask2former`` extra (transformers 5) is not installed: Mask2Former needs it.

    A mistake in the installation, not in the weights: it is about
    ``model.arch``, and its fix is the extra's install command.
    """

    default_field = "model.arch"


_INSTALL = (
    "install the extra: pip install 'streamseg[mask2former]'; scripts/setup.sh installs it, "
    "or pip install 'transformers>=5,<6'"
)


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise MissingTransformersError(
            "Mask2Former needs the `transformers` package, which is not installed", fix=_INSTALL
        ) from None
    major = int(transformers.__version__.split(".")[0])
    if major != 5:
        raise MissingTransformersError(
            f"Mask2Former needs transformers 5.x (module and key names differ), "
            f"found {transformers.__version__}",
            fix=_INSTALL,
        )
    return transformers


class _ResNetIsFine(logging.Filter):
    """Drops transformers' "Backbone resnet is not a supported model" warning.

    Mask2Former's R50 model is a published configuration, and the tests run it;
    the warning only says transformers' own hub checkpoints are all Swin.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "is not a supported model" not in record.getMessage()


def _quiet_backbone_warning() -> None:
    log = logging.getLogger("transformers.models.mask2former.configuration_mask2former")
    if not any(isinstance(f, _ResNetIsFine) for f in log.filters):
        log.addFilter(_ResNetIsFine())


def _backbone_config(backbone: str, drop_path_rate: float) -> Any:
    tf = _transformers()
    stages = ["stage1", "stage2", "stage3", "stage4"]
    if backbone in ("r50", "tiny_r50"):
        small = backbone == "tiny_r50"  # R50's block layout, few channels and blocks
        return tf.ResNetConfig(
            embedding_size=16 if small else 64,
            hidden_sizes=[32, 64, 128, 256] if small else [256, 512, 1024, 2048],
            depths=[1, 1, 1, 1] if small else [3, 4, 6, 3],
            layer_type="bottleneck",
            downsample_in_bottleneck=False,
            out_features=stages,
        )
    if backbone == "small":
        # A placeholder with maskrcnn_small's stage widths (what the pixel
        # decoder is built for); Mask2Former swaps in streamseg's trunk.
        return tf.ResNetConfig(
            embedding_size=24,
            hidden_sizes=[24, 48, 96, 192],
            depths=[1, 1, 1, 1],
            layer_type="basic",
            out_features=stages,
        )
    if backbone == "swin_t":
        return tf.SwinConfig(
            embed_dim=96,
            depths=[2, 2, 6, 2],
            num_heads=[3, 6, 12, 24],
            window_size=7,
            drop_path_rate=drop_path_rate,
            out_features=stages,
        )
    if backbone == "tiny":
        return tf.SwinConfig(
            embed_dim=16,
            depths=[1, 1, 1, 1],
            num_heads=[1, 1, 2, 2],
            window_size=4,
            drop_path_rate=0.0,
            out_features=stages,
        )
    raise ValueError(f"unknown Mask2Former backbone {backbone!r}; choose one of {BACKBONES}")


def hf_config(
    backbone: str,
    *,
    num_classes: int,
    num_points: int = 12544,
    num_queries: int = 100,
    no_object_weight: float = 0.1,
    drop_path_rate: float = 0.3,
) -> Any:
    """A ``transformers.Mask2FormerConfig`` for ``backbone`` and ``num_classes``.

    Args:
        backbone: ``"r50"``, ``"swin_t"``, ``"small"``, or ``"tiny"`` /
            ``"tiny_r50"`` (tests).
        num_classes: object classes, not counting the "no object" class.
        num_points: points sampled per mask by the training loss.
        num_queries: object queries (100 in the published models).
        no_object_weight: weight of the "no object" class in the class loss.
        drop_path_rate: Swin stochastic depth during training.
    """
    tf = _transformers()
    _quiet_backbone_warning()
    labels = {i: f"class_{i + 1}" for i in range(num_classes)}
    sizes: dict[str, Any] = {}
    if backbone.startswith("tiny"):
        # Three decoder layers (two masked-attention layers + the query init
        # prediction), one encoder layer, 32 channels: GroupNorm(32) still fits.
        sizes = dict(
            feature_size=32,
            mask_feature_size=32,
            hidden_dim=32,
            encoder_feedforward_dim=64,
            dim_feedforward=64,
            encoder_layers=1,
            decoder_layers=3,
            num_attention_heads=2,
        )
    elif backbone == "small":
        # 64 channels, two deformable-attention encoder layers, three
        # masked-attention layers (four predictions with the query init).
        sizes = dict(
            feature_size=64,
            mask_feature_size=64,
            hidden_dim=64,
            encoder_feedforward_dim=256,
            dim_feedforward=256,
            encoder_layers=2,
            decoder_layers=4,
            num_attention_heads=4,
        )
    return tf.Mask2FormerConfig(
        backbone_config=_backbone_config(backbone, drop_path_rate),
        num_labels=num_classes,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
        num_queries=num_queries,
        no_object_weight=no_object_weight,
        train_num_points=num_points,
        **sizes,
    )
