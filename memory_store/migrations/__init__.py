"""Alembic migrations of ``memory_store`` (run by ``Database.migrate``)."""
