"""Alerts (issue #27): the webhook, watched channels, and one thread per problem."""
