"""Publish: versioned JSON messages on Redis Streams, with buffering across outages."""
