"""The size of bitsandbytes' NF4 weights with double quantisation (block 64, constants in blocks of 256)."""

NF4_BYTES_PER_PARAM = 0.5 + (8 / 64 + 32 / (64 * 256)) / 8
"""4 bits per element plus the double-quantised constants: 8/64 + 32/(64*256) bits = 0.127 bits/param."""
