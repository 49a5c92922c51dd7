"""Which Claude Code release the model-facing tool surface tracks.

Names, parameters, formats and the short sentences the model parses follow this
release (read from its bundled tools; docs/tools.md lists them). Check the current
release (``npm view @anthropic-ai/claude-code version``) and move this on purpose.
"""

from __future__ import annotations

CLAUDE_CODE_RELEASE = "2.1.332"
CLAUDE_CODE_RELEASE_DATE = "2026-11-24"
