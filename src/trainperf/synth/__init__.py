"""Hermetic inputs: random-weight models from shipped configs, a local tokenizer, synthetic token data."""
