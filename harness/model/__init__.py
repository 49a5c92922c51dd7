"""The model: the transcript's values (``messages``) and the Messages API adapter (``adapter``)."""
