"""The agent loop: one step over a checkpoint, the prompt, turns and compaction, limits, events."""
