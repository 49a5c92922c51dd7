"""Roles for cluster, container, cloud and database clients, and git.

These programs take names, not files, as operands: resources (``kubectl get pod x``),
parameters and keys (``aws ssm get-parameter --name /incident/x``, ``etcdctl get
/memory``), SQL (``psql -c "… incident …"``), commit messages. What runs inside a pod or
container (``kubectl exec … -- ls /memory``, ``docker run img cat /memory``) runs on
*its* filesystem. The local files are the ones each tool documents: ``-f`` manifests,
kubeconfigs, ``docker -v HOST:CTR`` host sides and build contexts, ``aws``
``file://`` parameters and ``s3 cp`` local operands, ``psql -f``, ``git -C``.
Their output is remote data, tainted ``download`` like curl's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from harness.guard.fields import plain
from harness.guard.invocation import Access, Invocation
from harness.guard.options import Arg, names, operands, option_values, parse_args, spec
from harness.guard.programs.generic import MESSAGE_OPTIONS
from harness.guard.state import Stream

Handler = Callable[[Invocation], None]

_KUBECTL = spec(
    "-n -s -l -o -c -f -k -p -e -L",
    "--namespace --context --cluster --user --server --token --as --as-group",
    "--selector --output --container --field-selector --sort-by --template",
    "--filename --kustomize --kubeconfig --certificate-authority --client-key",
    "--client-certificate --from-file --from-env-file --from-literal --image",
    "--replicas --port --timeout --since --tail --type --patch --overrides --env",
)
_KUBECTL_FILES = (
    "-f",
    "--filename",
    "-k",
    "--kustomize",
    "--kubeconfig",
    "--from-env-file",
    "--certificate-authority",
    "--client-certificate",
    "--client-key",
)
_KUBECTL_REMOTE = frozenset({"exec", "attach", "run", "debug", "port-forward", "proxy"})
_REMOTE_PATH = re.compile(r"^[\w.-][\w./-]*:")
_DOCKER_RUN_FLAGS = frozenset("ditPq")
_DOCKER_BUILD_FLAGS = frozenset("q")
_DOCKER_BOOL_LONG = names(
    "--rm --detach --interactive --tty --privileged --init --read-only --publish-all "
    "--no-healthcheck --oom-kill-disable --sig-proxy --quiet --help --pull"
)
_GIT_GLOBAL = spec(
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--exec-path",
    "--config-env",
    stop_at_operand=True,
)
_GIT_SUB = spec(
    *MESSAGE_OPTIONS,
    "-m",
    "-F",
    "--file",
    "-S",
    "-G",
    "--author",
    "--committer",
    "--format",
    "--pretty",
    "--since",
    "--until",
    "--date",
    "-n",
    "-t",
    "--template",
    "-e",
    "--regexp",
    "-C",
    "-c",
    "--reuse-message",
    "--reedit-message",
    "--fixup",
    "--squash",
    "--branch",
    "-b",
    "-B",
)
_PSQL = spec(
    "-c -d -f -h -p -U -v -o -L -P -T -F -R",
    "--command --dbname --file --host --port --username --set --variable",
    "--output",
    "--log-file",
)
_MYSQL = spec("-e -h -u -P -D -S", "--execute --host --user --port --database --socket")


_LOCAL_SUBCOMMANDS = frozenset({"completion", "version", "help", "config", "configure"})


def _remote_output(inv: Invocation) -> None:
    """Output fetched from a cluster, registry or cloud API (not for local subcommands)."""
    words = [plain(field) for field in inv.args if not plain(field).startswith("-")]
    if not words or words[0] not in _LOCAL_SUBCOMMANDS:
        inv.output(Stream(None, taint="download"))


def _file_value(inv: Invocation, field: str, access: Access = Access.READ) -> None:
    text = plain(field)
    if text == "-" or ("://" in text and not text.startswith("file:")):
        return
    inv.touch(field, access)


def _kubectl(inv: Invocation) -> None:
    parsed = parse_args(inv.args, spec(*_KUBECTL.takes_value))
    subcommand = next((plain(a.value) for a in parsed if a.option is None and a.value), "")
    for arg in parsed:
        if arg.value is None:
            continue
        if arg.option in _KUBECTL_FILES:
            _file_value(inv, arg.value)
        elif arg.option == "--from-file":
            value = arg.value
            _file_value(inv, value[plain(value).index("=") + 1 :] if "=" in plain(value) else value)
    if subcommand == "cp":
        for field in operands(parsed)[1:]:
            if not _REMOTE_PATH.match(plain(field)) or plain(field).startswith("."):
                inv.touch(field, Access.READ)
    _remote_output(inv)


def _helm(inv: Invocation) -> None:
    parsed = parse_args(
        inv.args,
        spec(
            "-f",
            "--values",
            "--set-file",
            "--kubeconfig",
            "-n",
            "--namespace",
            "--set",
            "--set-string",
            "--version",
        ),
    )
    for value in option_values(parsed, "-f", "--values", "--kubeconfig"):
        _file_value(inv, value)
    for value in option_values(parsed, "--set-file"):
        for piece in plain(value).split(","):
            inv.touch(piece.partition("=")[2], Access.READ)
    for field in operands(parsed):
        if plain(field).startswith(("/", ".", "~")):
            inv.touch(field, Access.READ)
    _remote_output(inv)


def _docker_options(args: list[str], flags: frozenset[str]) -> tuple[list[Arg], list[str]]:
    """Options of a docker subcommand (``flags``: its one-letter flags), and the operands."""
    parsed: list[Arg] = []
    index = 0
    while index < len(args):
        text = plain(args[index])
        index += 1
        if not text.startswith("-") or text == "-":
            return parsed, args[index - 1 :]
        name, equals, _ = text.partition("=")
        if equals:
            parsed.append(Arg(name, args[index - 1][len(name) + 1 :]))
        elif text in _DOCKER_BOOL_LONG or (not text.startswith("--") and set(text[1:]) <= flags):
            parsed.append(Arg(text, None))
        elif index < len(args):
            parsed.append(Arg(text, args[index]))
            index += 1
    return parsed, []


def _docker_volumes(inv: Invocation, parsed: list[Arg]) -> None:
    for value in option_values(parsed, "-v", "--volume"):
        host = value.split(":")[0]
        if plain(host).startswith(("/", ".", "~")):
            inv.touch(host, Access.WRITE)
    for value in option_values(parsed, "--mount"):
        for piece in plain(value).split(","):
            key, _, path = piece.partition("=")
            if key in ("source", "src"):
                inv.touch(path, Access.WRITE)
    for value in option_values(parsed, "--env-file", "--label-file", "-f", "--file"):
        _file_value(inv, value)


def _docker(inv: Invocation) -> None:
    args = list(inv.args)
    while args and plain(args[0]).startswith("-"):
        skip = 2 if plain(args[0]) in ("-H", "--host", "-c", "--context", "--config", "-l") else 1
        if plain(args[0]) == "--config" and len(args) > 1:
            inv.touch(args[1], Access.READ)
        args = args[skip:]
    subcommand = plain(args[0]) if args else ""
    rest = args[1:]
    if subcommand in ("buildx", "image", "container") and rest:
        subcommand, rest = f"{subcommand} {plain(rest[0])}", rest[1:]
    building = subcommand in ("build", "buildx build", "image build")
    parsed, positional = _docker_options(
        rest, _DOCKER_BUILD_FLAGS if building else _DOCKER_RUN_FLAGS
    )
    _docker_volumes(inv, parsed)
    for value in option_values(parsed, "-o", "--output", "--cidfile", "-i", "--input"):
        _file_value(inv, value, Access.WRITE)
    if building and positional:
        _file_value(inv, positional[0])
    elif subcommand in ("cp", "container cp"):
        for field in positional:
            if not _REMOTE_PATH.match(plain(field)) or plain(field).startswith("."):
                inv.touch(field, Access.READ)
    elif subcommand in ("load", "import", "image load", "image import") and positional:
        _file_value(inv, positional[0])
    _remote_output(inv)


def _aws(inv: Invocation) -> None:
    fields = list(inv.args)
    texts = [plain(field) for field in fields]
    for field, text in zip(fields, texts, strict=True):
        if text.startswith(("file://", "fileb://")):
            inv.touch("/" + field.partition("://")[2].lstrip("/"), Access.READ)
    words = [t for t in texts if not t.startswith("-")]
    if (
        inv.name == "aws"
        and words[:1] == ["s3"]
        and words[1:2]
        and words[1] in ("cp", "mv", "sync")
    ):
        local = [
            f
            for f, t in zip(fields, texts, strict=True)
            if not t.startswith(("-", "s3://")) and t not in ("s3", words[1])
        ]
        for field in local:
            inv.touch(field, Access.READ)
    if inv.name in ("gsutil", "gcloud") and any(t in ("cp", "mv", "rsync") for t in words):
        for field, text in zip(fields, texts, strict=True):
            if text.startswith(("/", ".", "~")):
                inv.touch(field, Access.READ)
    for index, text in enumerate(texts[:-1]):
        if text in ("--body", "--file", "-f", "--source", "--flags-file") or text.endswith("-file"):
            _file_value(inv, fields[index + 1])
    _remote_output(inv)


def _key_value_client(inv: Invocation) -> None:
    for field in inv.args:
        text = plain(field)
        if text.startswith("@"):
            inv.touch(field[1:], Access.READ)
        elif (
            "=" in text
            and text.startswith("--")
            and any(word in text.partition("=")[0] for word in ("file", "cert", "key", "ca"))
        ):
            inv.touch(field[text.index("=") + 1 :], Access.READ)
    _remote_output(inv)


def _psql(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _PSQL)
    for value in option_values(parsed, "-f", "--file"):
        _file_value(inv, value)
    for value in option_values(parsed, "-o", "--output", "-L", "--log-file"):
        _file_value(inv, value, Access.WRITE)
    scripts = [plain(sql) for sql in option_values(parsed, "-c", "--command")]
    if not scripts and not option_values(parsed, "-f", "--file") and inv.stdin.text:
        scripts.append(inv.stdin.text)
    for sql in scripts:
        for match in re.finditer(r"\\(?:i|ir|include|o|out|w|write)\s+(\S+)", sql):
            inv.touch(match.group(1).strip("'\""), Access.READ)
        for match in re.finditer(r"\\copy\b.*?\b(?:from|to)\s+'([^']+)'", sql, re.I):
            inv.touch(match.group(1), Access.READ)
    _remote_output(inv)


def _mysql(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _MYSQL)
    for arg in parsed:
        if arg.option and arg.value and arg.option.startswith("--defaults"):
            inv.touch(arg.value, Access.READ)
    _remote_output(inv)


def _sqlite(inv: Invocation) -> None:
    files = operands(parse_args(inv.args, spec("-cmd", "-separator", "-newline", "-nullvalue")))
    if files:
        inv.touch(files[0], Access.READ)
    scripts = [plain(sql) for sql in files[1:]] + [inv.stdin.text or ""]
    for sql in scripts:
        for match in re.finditer(r"\.(?:read|import|output|once|backup|restore|open)\s+(\S+)", sql):
            inv.touch(match.group(1).strip("'\""), Access.READ)


def _git(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _GIT_GLOBAL)
    base = None
    for arg in parsed:
        if arg.option in ("-C", "--git-dir", "--work-tree") and arg.value is not None:
            inv.touch(arg.value, Access.CHDIR)
            base = arg.value if arg.option == "-C" else base
    rest = operands(parsed)
    if not rest:
        return
    subcommand, sub_args = plain(rest[0]), rest[1:]
    sub_parsed = parse_args(sub_args, _GIT_SUB)
    for value in option_values(sub_parsed, "-F", "--file", "-t", "--template"):
        _file_value(inv, value)
    files = operands(sub_parsed)
    if subcommand == "grep" and not option_values(sub_parsed, "-e", "--regexp") and files:
        files = files[1:]
    if subcommand in (
        "config",
        "remote",
        "clone",
        "fetch",
        "push",
        "pull",
        "checkout",
        "switch",
        "branch",
        "tag",
        "notes",
        "stash",
        "bisect",
        "revert",
    ):
        files = [f for f in files if plain(f).startswith(("/", "."))]
    for field in files:
        inv.touch(field, Access.READ, base=base)


def ops_handlers() -> dict[str, Handler]:
    """The handlers of this module by command name."""
    handlers: dict[str, Handler] = {
        "kubectl": _kubectl,
        "oc": _kubectl,
        "helm": _helm,
        "aws": _aws,
        "gsutil": _aws,
        "gcloud": _aws,
        "az": _aws,
        "psql": _psql,
        "mysql": _mysql,
        "mariadb": _mysql,
        "sqlite3": _sqlite,
        "git": _git,
    }
    for name in ("docker", "podman", "nerdctl"):
        handlers[name] = _docker
    for name in ("redis-cli", "etcdctl", "consul", "vault", "zkCli.sh", "nomad", "mongosh"):
        handlers[name] = _key_value_client
    for name in ("lxc", "incus", "multipass", "vagrant", "crictl", "ctr", "docker-compose"):
        handlers[name] = _key_value_client
    return handlers
