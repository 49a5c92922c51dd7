"""``/agent skills``: the command, its editor modal, and who may edit."""
