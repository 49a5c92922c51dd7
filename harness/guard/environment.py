"""The environment a program receives: when a virtual path handed through it is a touch.

bash gives the program it runs every exported variable plus the ``NAME=value``
assignments written before it (and those ``env``/``sudo`` set). The guard cannot see
what a script, an interpreter or a program it does not know does with them, so a value
that names a virtual path, handed to such a program, counts as a touch
(``CONFIG=/skills/k8s/deploy.yaml ./deploy.sh``, ``env INC=/incident/INC-1 python3
report.py``). A program the command table knows reads only the variables it is
documented to read; of those, ``PATH_VARIABLES`` name files that the dynamic loader, the
shells and common tools open whatever the program (``LD_PRELOAD=/memory/x.so ls``,
``KUBECONFIG=/incident/kube kubectl get pods``).

A value counts when it, or one piece of it cut at ``:``, ``,`` or ``=``, is a path (it
holds a ``/`` or starts with ``.`` or ``~``) that resolves into a namespace from the
program's working directory. Words (``MODE=memory``) and sentences (``NOTE='see
/memory/x'``) do not. Builtins and shell functions run in the shell itself and get no
environment of their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from functools import cache

from harness.guard.commands import handler_for
from harness.guard.options import names
from harness.guard.paths import VIRTUAL_ROOTS
from harness.guard.programs.generic import unknown_program
from harness.guard.programs.interpreters import interpreter_handlers

PATH_VARIABLES = names(
    "LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT BASH_ENV ENV HOME ZDOTDIR INPUTRC TMPDIR "
    "XDG_CONFIG_HOME XDG_DATA_HOME XDG_CACHE_HOME XDG_RUNTIME_DIR KUBECONFIG GIT_DIR "
    "GIT_WORK_TREE GIT_CONFIG_GLOBAL GIT_CONFIG_SYSTEM GIT_SSH_COMMAND PYTHONPATH "
    "PYTHONSTARTUP PYTHONHOME PYTHONUSERBASE NODE_PATH NODE_OPTIONS PERL5LIB PERL5OPT RUBYLIB "
    "PGPASSFILE PSQLRC PGSERVICEFILE MYSQL_HISTFILE AWS_CONFIG_FILE "
    "AWS_SHARED_CREDENTIALS_FILE GOOGLE_APPLICATION_CREDENTIALS DOCKER_CONFIG SSL_CERT_FILE "
    "SSL_CERT_DIR CURL_CA_BUNDLE REQUESTS_CA_BUNDLE LESSOPEN LESSKEY HISTFILE VIMINIT "
    "EDITOR VISUAL PAGER"
)
"""Variables naming files that are opened whatever the program is (the loader, shells,
git, kubectl, psql, the AWS and Google SDKs, TLS libraries, pagers, editors)."""

_PIECE_CUT = re.compile(r"[:,=]")


@cache
def _code_runners() -> frozenset[Callable[..., None]]:
    return frozenset({unknown_program, *interpreter_handlers().values()})


def _opaque(program: str) -> bool:
    """A script run by path, a shell or interpreter, or a program the table does not know."""
    return "/" in program or handler_for(program) in _code_runners()


def _looks_like_path(text: str) -> bool:
    return "/" in text or text.startswith((".", "~"))


def _names_a_root(text: str) -> bool:
    """A path can only resolve into a namespace if its text holds the namespace's name."""
    return any(root in text for root in VIRTUAL_ROOTS)


def handed_paths(program: str, environment: Mapping[str, frozenset[str]]) -> Iterator[str]:
    """The values (or value pieces) in ``environment`` that ``program`` may open as paths.

    >>> list(handed_paths("./run.sh", {"F": frozenset({"/memory/x"}), "M": frozenset({"memory"})}))
    ['/memory/x']
    >>> list(handed_paths("sort", {"F": frozenset({"/memory/x"})}))
    []
    """
    opaque = _opaque(program)
    for name, values in sorted(environment.items()):
        if not (opaque or name in PATH_VARIABLES):
            continue
        for value in sorted(values):
            for piece in dict.fromkeys([value, *_PIECE_CUT.split(value)]):
                if " " not in piece and _looks_like_path(piece) and _names_a_root(piece):
                    yield piece
