"""Recurring wake-ups (``CronCreate``): the ``cron_jobs`` rows and their schedules."""
