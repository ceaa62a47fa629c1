"""Synthetic scenes with exact ground truth: the test and benchmark camera.

``scene.py`` holds :class:`SyntheticScene` (a seeded, deterministic video of
moving, occluding textured shapes); ``motion.py``, ``sprites.py`` and
``render.py`` are its parts; ``export.py`` writes a scene to an MP4 plus
COCO annotations. The ``synthetic://`` camera source in ``streamseg.ingest``
plays a scene as a live camera. Importing this package loads nothing.
"""
