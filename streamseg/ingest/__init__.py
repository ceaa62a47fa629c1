"""Ingest: camera sources (RTSP, files, V4L2, synthetic scenes) and decoders (PyAV, DALI)."""
