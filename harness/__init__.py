"""harness: the agent (one step of the loop, the model adapter, tools, path routing, bash guard)."""
