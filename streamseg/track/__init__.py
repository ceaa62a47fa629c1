"""Track: a ByteTrack-style multi-object tracker that gives instances persistent ids."""
