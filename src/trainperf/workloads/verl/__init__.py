"""verl's child side: Hydra overrides, log reading, failure classification, measured lengths."""
