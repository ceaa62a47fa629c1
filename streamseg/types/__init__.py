"""The data that flows between streamseg's stages.

Every stage takes and returns only these types:

``Frame`` -> ``FrameBatch`` -> (segment) -> ``Instances`` per frame, wrapped with
its frame in a ``FrameResult`` -> (track) ``Instances`` with ``track_ids`` and
``Track`` state -> (alert) ``Event``.

Conventions used everywhere:

* images are ``uint8`` tensors laid out ``H x W x 3`` in RGB order, on the CPU
  or on a GPU;
* boxes are ``xyxy`` in frame pixels (float32), ``x2``/``y2`` exclusive edges;
* times are seconds (floats): ``pts`` is the stream's presentation time,
  ``capture_time`` is the wall clock (``time.time()``) at which the frame was
  read from its source, ``camera_time`` the camera's own wall clock when the
  source reports one (RTCP sender reports), else ``None``;
* class labels are integers ``>= 1`` (0 is background), names come from the
  model's ``class_names``;
* masks are ``bool (N, H, W)`` at frame resolution, or ``MaskCrops``: each
  mask as the crop of its box (the serving path's form, whose cost follows
  the objects' area); ``MaskCrops.to_masks()`` gives the frame-size form.

One module per level of the flow: ``frames`` (``Frame``, ``FrameBatch``),
``masks`` (``MaskCrops`` and the helpers that read either form),
``instances`` (``Instances``, ``FrameResult``), ``regions`` (``Regions``, the
class-label map a frame's ``Instances`` carry), ``events`` (``Track``,
``Event``); every name is imported from here (``from streamseg.types import
Frame``).
"""

from streamseg.types.events import EVENT_SCHEMA_VERSION, Event, Track, TrackState
from streamseg.types.frames import Frame, FrameBatch
from streamseg.types.instances import FrameResult, Instances
from streamseg.types.masks import MaskCrops, frame_masks, mask_grid
from streamseg.types.regions import Regions

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "Event",
    "Frame",
    "FrameBatch",
    "FrameResult",
    "Instances",
    "MaskCrops",
    "Regions",
    "Track",
    "TrackState",
    "frame_masks",
    "mask_grid",
]
