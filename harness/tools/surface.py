"""Which Claude Code release the model-facing tool surface tracks.

Names, parameters, formats and the short sentences the model parses follow this
release (docs/tools.md lists them); ``tests/harness/tools/conformance`` checks every result
against the results Claude Code gave for the same calls, per captured release.

A newer release: the newest ship only in the native package
``@anthropic-ai/claude-code-linux-x64`` (the ``@anthropic-ai/claude-code`` wrapper's
``npm view … version`` stopped at 2.1.332), so look there
(``npm view @anthropic-ai/claude-code-linux-x64 version``), fetch it with ``npm pack``,
and run the conformance kit's ``capture/capture_release.sh`` on its ``claude`` binary:
it replays the scenario through that release against a scripted local stand-in of the
Messages API and writes the release's results. Copy its opt-in ``results.json`` to
``tests/harness/tools/conformance/captures/cc-VERSION-optin.json``, run the conformance test,
change what moved (or list it with its reason in ``known_differences.toml``), and bump
the constants below. Never commit the capture's raw requests (they hold Claude Code's
prompt and tool descriptions).
"""

from __future__ import annotations

CLAUDE_CODE_RELEASE = "2.1.336"
CLAUDE_CODE_RELEASE_DATE = "2026-12-03"
