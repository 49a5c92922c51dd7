"""The incident record (§15): the timeline built from the event log, its renderings."""
