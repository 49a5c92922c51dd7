"""The model: model ids (``catalog``), the transcript's values (``messages``), the request body
(``request``) and the Messages API adapter (``adapter``)."""
