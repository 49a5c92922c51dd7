"""The org file store: /memory, /skills and /incident files with lossless revision history."""
