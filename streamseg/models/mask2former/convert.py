"""Key names of Mask2Former checkpoint files vs transformers 5's modules.

Files on the Hugging Face hub (and what ``save_pretrained`` writes, even in
transformers 5) name the Swin backbone's weights the transformers-4 way::

    model.pixel_level_module.encoder.encoder.layers.0.blocks.0.attention.self.query.weight

while transformers 5's modules, and so this model's ``state_dict()``, say::

    model.pixel_level_module.encoder.swin.encoder.layers.0.blocks.0.attention.q_proj.weight

:func:`to_model_keys` renames file keys to module keys (keys already in module
form pass through), and drops ``relative_position_index`` buffers that
transformers 4 stored (they are fixed functions of the window size). Every
other Mask2Former key (ResNet backbone, pixel decoder, transformer decoder,
heads) has the same name in both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from torch import Tensor

__all__ = ["UNUSED_MODULE_KEYS", "to_model_keys"]

_BACKBONE = "model.pixel_level_module.encoder."

# Applied in order to the part of a key after ``_BACKBONE``.
_SWIN_RENAMES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"^embeddings\.", "swin.embeddings."),
        (r"^encoder\.", "swin.encoder."),
        (r"^layernorm\.", "swin.layernorm."),
        (r"\.attention\.self\.query\.", ".attention.q_proj."),
        (r"\.attention\.self\.key\.", ".attention.k_proj."),
        (r"\.attention\.self\.value\.", ".attention.v_proj."),
        (
            r"\.attention\.self\.relative_position_bias_table$",
            ".attention.relative_position_bias.relative_position_bias_table",
        ),
        (r"\.attention\.output\.dense\.", ".attention.o_proj."),
        (r"\.intermediate\.dense\.", ".mlp.fc1."),
        (r"\.output\.dense\.", ".mlp.fc2."),
    )
)

# Module weights a transformers-4 file does not have and the forward never
# uses (SwinModel's final norm; the backbone normalises with its own
# ``hidden_states_norms``): loading leaves them as initialised.
UNUSED_MODULE_KEYS = ("swin.layernorm.weight", "swin.layernorm.bias")


def _is_file_swin_key(rest: str) -> bool:
    return rest.startswith(("embeddings.", "encoder.layers.", "layernorm."))


def to_model_keys(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``state`` with hub-file Swin key names renamed to transformers 5 module names."""
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        if key.startswith(_BACKBONE) and _is_file_swin_key(key[len(_BACKBONE) :]):
            rest = key[len(_BACKBONE) :]
            if rest.endswith("attention.self.relative_position_index"):
                continue
            for pattern, replacement in _SWIN_RENAMES:
                rest = pattern.sub(replacement, rest)
            key = _BACKBONE + rest
        out[key] = value
    return out
