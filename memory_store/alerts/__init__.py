"""The alert registry: deliveries taken once, one open thread per problem (issue #27)."""
