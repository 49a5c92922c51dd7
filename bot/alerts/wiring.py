"""Building the alert intake and webhook from ``Settings`` (the composition root's part).

``serve`` calls ``build_alerts`` once it has the Slack dependencies; the drill and tests
build the same way. The intake and its taker are always built (watched channels use
them); the webhook is off (None) unless ``WARROOM_ALERT_TOKEN`` or
``WARROOM_ALERT_PAGERDUTY_SECRET`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from bot.alerts.auth import AlertAuth
from bot.alerts.intake import AlertIntake, AlertPolicy, BudgetLeft
from bot.alerts.routes import Routes
from bot.alerts.webhook import AlertWebhook, Taker
from bot.settings import Settings
from bot.slack.app import SlackDeps
from memory_store import AlertStore, Database, ModelCallLog

NANO = 1_000_000_000


@dataclass(frozen=True)
class Alerts:
    """The running alert intake of a process: ``intake`` (the watched channels use it
    too), ``taker`` (start and stop it with the listener), ``webhook`` (None: off)."""

    intake: AlertIntake
    taker: Taker
    webhook: AlertWebhook | None


def alerts_enabled(settings: Settings) -> bool:
    """Whether the webhook is set up (a token or a signing secret)."""
    return settings.alert_token is not None or settings.alert_pagerduty_secret is not None


def load_routes(settings: Settings) -> Routes:
    """The routing rules file (``WARROOM_ALERT_ROUTES``) with ``WARROOM_ALERT_CHANNEL``
    as its default channel. Blocking I/O: at start-up.

    Raises:
        RoutesError: a rule is wrong (each named).
        OSError: the file cannot be read.
    """
    return Routes.load(settings.alert_routes, default_channel=settings.alert_channel)


def policy_of(settings: Settings) -> AlertPolicy:
    """Storm control and grouping from the settings."""
    return AlertPolicy(
        max_open_per_org=settings.alert_max_open,
        burst_window_s=settings.alert_burst_window_s,
        summary_channel_id=settings.alert_summary_channel,
    )


def org_budget(ledger: ModelCallLog, cap_usd: float | None) -> BudgetLeft | None:
    """Whether an org spent less than ``cap_usd`` today (UTC); None without a cap."""
    if cap_usd is None:
        return None

    async def left(org_id: str) -> bool:
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        spent = await ledger.spent(org_id, since=today)
        return spent.cost_nanousd < cap_usd * NANO

    return left


def build_alerts(
    settings: Settings, deps: SlackDeps, db: Database, *, routes: Routes | None = None
) -> Alerts:
    """The intake and taker over the Slack app's dependencies, and the webhook when
    ``alerts_enabled``; ``deps.installation`` names the org webhook alerts belong to.

    Raises:
        RoutesError, OSError: the routes file (checked by the preflight first).
        ValueError: the webhook is on but ``deps.installation`` is None.
    """
    intake = AlertIntake(
        store=AlertStore(db),
        sessions=deps.sessions,
        client=deps.client,
        poster=deps.poster,
        enqueue=deps.enqueue,
        bot_user_id=deps.bot_user_id,
        policy=policy_of(settings),
        budget_left=org_budget(ModelCallLog(db), settings.max_org_day_cost_usd),
        dedupe=deps.dedupe,
    )
    taker = Taker(intake)
    if not alerts_enabled(settings):
        return Alerts(intake, taker, None)
    installation = deps.installation
    if installation is None:
        raise ValueError("the alert webhook needs the installation (auth.test) to know its org")
    webhook = AlertWebhook(
        intake=intake,
        taker=taker,
        routes=routes if routes is not None else load_routes(settings),
        auth=AlertAuth(
            token=_secret(settings.alert_token),
            pagerduty_secret=_secret(settings.alert_pagerduty_secret),
        ),
        org_id=installation.org_id,
        retry_window_s=settings.alert_retry_window_s,
    )
    return Alerts(intake, taker, webhook)


def _secret(value: object) -> str:
    from pydantic import SecretStr

    return value.get_secret_value() if isinstance(value, SecretStr) else ""
