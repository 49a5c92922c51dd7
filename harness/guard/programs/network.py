"""Roles for network clients: which of their arguments are local files.

A URL (``https://host/incident/2041``), a remote path (``ssh host cat /memory``,
``host:/tmp``, ``pod:/tmp/x``), a parameter or key name (``aws ssm --name /incident/x``,
``etcdctl get /memory``) and a request body (``curl -d '{"path": "/memory"}'``) are not
files in the sandbox. The local files are the ones each tool documents as such:
``curl -o/-T/-d @file/-F name=@file``, ``file://`` URLs, ``scp``/``rsync`` operands
without a host, ``aws s3 cp`` local operands and ``file://`` parameters.

Output of these programs is *downloaded*: it carries the ``download`` taint, so piping
it into a shell is refused by policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from harness.guard.fields import plain
from harness.guard.invocation import Access, Invocation
from harness.guard.options import Arg, operands, option_values, parse_args, spec
from harness.guard.state import Stream

Handler = Callable[[Invocation], None]

_REMOTE_SPEC = re.compile(r"^(?:[\w.-]+@)?[\w.-]+:(?!//)")
_CURL = spec(
    "-o -T -K -E -b -c -D -d -F -H -X -u -A -e -m -x -w -r -Y -y -z -U -C -Q",
    "--output --upload-file --config --cert --key --cacert --capath --cookie",
    "--cookie-jar --dump-header --data --data-ascii --data-binary --data-raw",
    "--data-urlencode --json --form --form-string --header --request --user",
    "--user-agent --referer --max-time --proxy --write-out --range --url",
    "--connect-timeout --retry --retry-delay --resolve --interface --output-dir",
    "--trace --trace-ascii --stderr --netrc-file --limit-rate --oauth2-bearer",
)
_CURL_WRITES = (
    "-o",
    "--output",
    "-c",
    "--cookie-jar",
    "-D",
    "--dump-header",
    "--trace",
    "--trace-ascii",
    "--stderr",
    "--output-dir",
)
_CURL_READS = (
    "-T",
    "--upload-file",
    "-K",
    "--config",
    "-E",
    "--cert",
    "--key",
    "--cacert",
    "--capath",
    "--netrc-file",
)
_CURL_DATA = ("-d", "--data", "--data-ascii", "--data-binary", "--data-urlencode", "--json")
_WGET = spec(
    "-O -o -a -P -i -e -U -t -T -w",
    "--output-document --output-file --append-output --directory-prefix --input-file",
    "--post-file --body-file --load-cookies --save-cookies --ca-certificate",
    "--certificate --private-key --header --user --password --post-data --method",
)
_WGET_WRITES = (
    "-O",
    "--output-document",
    "-o",
    "--output-file",
    "-a",
    "--append-output",
    "-P",
    "--directory-prefix",
    "--save-cookies",
)
_WGET_READS = (
    "-i",
    "--input-file",
    "--post-file",
    "--body-file",
    "--load-cookies",
    "--ca-certificate",
    "--certificate",
    "--private-key",
)
_SSH = spec("-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w", stop_at_operand=True)
_SCP = spec("-c -F -i -J -l -o -P -S")
_RSYNC = spec(
    "-e -f -B -T -M -@",
    "--rsh --exclude --include --filter --rsync-path --backup-dir --suffix --chmod",
    "--chown --timeout --bwlimit --block-size --port --out-format --partial-dir",
    "--exclude-from --include-from --files-from --password-file --log-file",
    "--temp-dir --compare-dest --copy-dest --link-dest",
)
_RSYNC_PATHS = (
    "--exclude-from",
    "--include-from",
    "--files-from",
    "--password-file",
    "--log-file",
    "--temp-dir",
    "--compare-dest",
    "--copy-dest",
    "--link-dest",
    "-T",
)
_FETCHERS = frozenset(
    {
        "nc",
        "ncat",
        "netcat",
        "socat",
        "telnet",
        "http",
        "https",
        "xh",
        "aria2c",
        "fetch",
        "lynx",
        "w3m",
        "links",
    }
)


def _downloaded(inv: Invocation) -> None:
    inv.output(Stream(None, taint="download"))


def _file_url(inv: Invocation, field: str, access: Access) -> None:
    if plain(field).startswith("file:"):
        inv.touch(field, access)


def _curl_data_file(option: str | None, field: str) -> str | None:
    """The file a curl data/form/header option reads (``-d @f``, ``-F k=@f``), if any."""
    value = plain(field)
    if option in _CURL_DATA or option in ("-H", "--header"):
        if value.startswith("@"):
            return field[1:]
        named = re.match(r"^[^=@]+@", value)
        return field[named.end() :] if named and option == "--data-urlencode" else None
    if option in ("-F", "--form"):
        form = re.search(r"=[@<]", value)
        return field[form.end() :].split(";")[0] if form else None
    return None


def _curl(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _CURL)
    for arg in parsed:
        if arg.value is None:
            continue
        value = plain(arg.value)
        data_file = _curl_data_file(arg.option, arg.value)
        if arg.option in _CURL_WRITES:
            inv.touch(arg.value, Access.WRITE)
            inv.mark_download(arg.value)
        elif arg.option in _CURL_READS or (arg.option in ("-b", "--cookie") and "=" not in value):
            inv.touch(arg.value, Access.READ)
        elif data_file is not None:
            inv.touch(data_file, Access.READ)
        elif arg.option in (None, "--url"):
            _file_url(inv, arg.value, Access.READ)
    if any(arg.option in ("-O", "--remote-name") for arg in parsed):
        _mark_url_names(inv, parsed)
    _downloaded(inv)


def _mark_url_names(inv: Invocation, parsed: list[Arg]) -> None:
    """``curl -O URL`` / ``wget URL`` save to the URL's last path component."""
    for field in operands(parsed):
        name = plain(field).split("?")[0].rstrip("/").rsplit("/", 1)[-1]
        if "://" in plain(field) and name:
            inv.mark_download(name)


def _wget(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _WGET)
    for name in _WGET_WRITES:
        for value in option_values(parsed, name):
            if plain(value) != "-":
                inv.touch(value, Access.WRITE)
                inv.mark_download(value)
    for name in _WGET_READS:
        for value in option_values(parsed, name):
            inv.touch(value, Access.READ)
    if not option_values(parsed, *_WGET_WRITES[:2]):
        _mark_url_names(inv, parsed)
    _downloaded(inv)


def _ssh(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _SSH)
    for value in option_values(parsed, "-F", "-i", "-E"):
        inv.touch(value, Access.READ)
    _downloaded(inv)


def _local_operands(inv: Invocation, fields: list[str]) -> None:
    for index, field in enumerate(fields):
        text = plain(field)
        if _REMOTE_SPEC.match(text) or "://" in text:
            continue
        inv.touch(field, Access.WRITE if index == len(fields) - 1 else Access.READ)


def _scp(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _SCP)
    for value in option_values(parsed, "-F", "-i"):
        inv.touch(value, Access.READ)
    _local_operands(inv, operands(parsed))


def _rsync(inv: Invocation) -> None:
    parsed = parse_args(inv.args, _RSYNC)
    for name in _RSYNC_PATHS:
        for value in option_values(parsed, name):
            inv.touch(value, Access.READ)
    _local_operands(inv, operands(parsed))


def network_handlers() -> dict[str, Handler]:
    """The handlers of this module by command name."""
    handlers: dict[str, Handler] = {name: _downloaded for name in _FETCHERS}
    handlers.update(
        {
            "curl": _curl,
            "wget": _wget,
            "ssh": _ssh,
            "mosh": _ssh,
            "scp": _scp,
            "sftp": _scp,
            "rsync": _rsync,
        }
    )
    return handlers
