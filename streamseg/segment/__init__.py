"""Segment: the Segmenter (preprocess, model, post-process) and compiled backends."""
