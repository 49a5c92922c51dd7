"""The local SBX/1 server: one sandbox's data plane, run inside its bubblewrap jail.

This subpackage uses only the standard library and only relative imports, because the
jail runs it with the host's interpreter in isolated mode (``python -I -S``) from a
read-only bind, under a different top-level name. Start-up cost is part of every
sandbox's provision time, so its modules import as little as they can: no ``asyncio``
(``loop`` is its event loop), ``subprocess``, ``dataclasses`` or ``typing`` at run time
(``tests/sandbox_client/test_spawn.py`` checks), ``ctypes`` only once the server is ready.

Entry point: ``main.main(argv)``; see ``config.ServerConfig`` for its settings.
"""

__all__: list[str] = []
