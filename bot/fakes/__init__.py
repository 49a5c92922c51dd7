"""Local fakes of outside services: real servers speaking their wire formats.

They serve the tests, ``warroom fake-anthropic`` (so ``warroom chat`` runs without a
real key) and the drill. Import the modules: ``bot.fakes.anthropic_api``,
``bot.fakes.slack_api``, ``bot.fakes.anthropic_script``.
"""
