"""bot: the Slack edge, Dramatiq wiring, settings and the `warroom` CLI."""
