"""The model-facing tools (Claude Code's names and formats) and the toolbox that runs them.

See docs/tools.md for the surface as the model sees it.
"""
