"""Train: record footage, pseudo-label it, fine-tune and evaluate models."""
