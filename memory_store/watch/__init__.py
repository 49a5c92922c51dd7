"""Watched channels (issue #27): which Slack channels are alert channels, per org."""
