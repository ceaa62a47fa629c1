"""Post-processing ops (NMS, RoIAlign, mask paste, RLE, box coding).

Each public function runs the native kernel built from ``ops/csrc`` when it
loaded, else the pure-PyTorch reference.
"""
