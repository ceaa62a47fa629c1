"""Config: the pydantic schema of pipeline.yaml and its loader."""
