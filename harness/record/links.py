"""Slack permalinks built from what Warroom already knows: no Web API call per line.

Slack's format (``chat.getPermalink``, api.slack.com/methods/chat.getPermalink): the
workspace URL, ``archives/<channel>/p<ts without its dot>``, and for a reply in a thread
``?thread_ts=<root ts>&cid=<channel>``. The workspace URL is ``auth.test``'s ``url``.

>>> permalink("https://acme.slack.com/", "C1H9RESGL", "1358546517.000023", "1358546515.000008")
'https://acme.slack.com/archives/C1H9RESGL/p1358546517000023?thread_ts=1358546515.000008&cid=C1H9RESGL'
>>> permalink("https://acme.slack.com", "C1H9RESGA", "1358546515.000008", "1358546515.000008")
'https://acme.slack.com/archives/C1H9RESGA/p1358546515000008'
"""

from __future__ import annotations


def permalink(workspace_url: str, channel_id: str, ts: str, thread_ts: str | None = None) -> str:
    """The permalink of message ``ts`` in ``channel_id`` (in the thread ``thread_ts``)."""
    base = workspace_url.rstrip("/")
    link = f"{base}/archives/{channel_id}/p{ts.replace('.', '')}"
    if thread_ts and thread_ts != ts:
        link += f"?thread_ts={thread_ts}&cid={channel_id}"
    return link
