"""The ``/filesystem/{path}`` endpoints, confined to one root directory.

Paths follow Blaxel's convention: after ``/filesystem/`` a leading slash (so a double
slash in the URL) makes the path absolute; otherwise it is relative to the root. Every
path, symbolic links resolved, must stay inside the root.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import stat
import time

from .http import HttpError, Reply, Request


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


_RANGE = re.compile(r"bytes=(?:(?P<first>\d+)-(?P<last>\d+)?|-(?P<suffix>\d+))")


class Filesystem:
    """Read, write, list and delete under ``root`` (files up to ``max_read_bytes``)."""

    def __init__(self, root: str, max_read_bytes: int) -> None:
        self._root = posixpath.normpath(root)
        self._real_root = os.path.realpath(root)
        self._max_read_bytes = max_read_bytes

    def resolve(self, raw: str) -> str:
        """The real path ``raw`` names.

        Raises:
            HttpError: 400 when it contains NUL or leaves the root (also via a link).
        """
        if "\x00" in raw:
            raise HttpError(400, "path contains a NUL character")
        path = raw if raw.startswith("/") else f"{self._root}/{raw}"
        path = "/" + posixpath.normpath(path).lstrip("/")
        if not _inside(path, self._root):
            raise HttpError(400, f"path is outside of the root directory {self._root}")
        real = os.path.realpath(path)
        if not _inside(real, self._real_root):
            raise HttpError(400, f"path leaves the root directory {self._root} through a link")
        return real

    def get(self, request: Request, raw: str) -> Reply:
        """A directory listing, or a file as JSON or (``Accept: application/octet-stream``)
        raw bytes."""
        path = self.resolve(raw)
        try:
            info = os.stat(path)
        except FileNotFoundError as exc:
            raise HttpError(404, "file or directory not found") from exc
        except OSError as exc:
            raise HttpError(422, f"cannot stat: {exc.strerror}") from exc
        if stat.S_ISDIR(info.st_mode):
            return Reply.of_json(self._listing(path))
        wanted = request.headers.get("range")
        if wanted is not None and "application/octet-stream" in request.headers.get("accept", ""):
            return self._range(path, info.st_size, wanted)
        if info.st_size > self._max_read_bytes:
            raise HttpError(
                413, f"file is {info.st_size} bytes; the limit is {self._max_read_bytes}"
            )
        data = self._read(path)
        accept = request.headers.get("accept", "")
        if "application/octet-stream" in accept or request.query.get("download") == "true":
            disposition = f'attachment; filename="{posixpath.basename(path)}"'
            headers = {"Content-Disposition": disposition}
            return Reply(body=data, content_type="application/octet-stream", headers=headers)
        entry = self._file_entry(path, info)
        return Reply.of_json({**entry, "content": data.decode("utf-8", "replace")})

    def _range(self, path: str, size: int, wanted: str) -> Reply:
        """Raw bytes of one range (RFC 9110 §14: ``bytes=START-``, ``bytes=START-END`` or the
        last N, ``bytes=-N``), at most ``max_read_bytes`` of it: 206 with ``Content-Range``,
        or 416 when it starts past the end (what a reader following a growing file asks)."""
        found = _RANGE.fullmatch(wanted.strip())
        if found is None:
            raise HttpError(
                400, f"unsupported Range {wanted!r}: give bytes=START-[END] or bytes=-N"
            )
        first, last, suffix = found.group("first"), found.group("last"), found.group("suffix")
        if suffix is not None:
            start, end = max(0, size - int(suffix)), size - 1
        else:
            start = int(first)
            end = size - 1 if last is None else min(int(last), size - 1)
        if start >= size or end < start:
            headers = {"Content-Range": f"bytes */{size}"}
            return Reply(
                status=416, body=b"", content_type="application/octet-stream", headers=headers
            )
        end = min(end, start + self._max_read_bytes - 1)
        try:
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read(end - start + 1)
        except OSError as exc:
            raise HttpError(422, f"error reading file: {exc.strerror}") from exc
        headers = {"Content-Range": f"bytes {start}-{start + len(data) - 1}/{size}"}
        return Reply(
            status=206, body=data, content_type="application/octet-stream", headers=headers
        )

    def _read(self, path: str) -> bytes:
        try:
            with open(path, "rb") as handle:
                return handle.read(self._max_read_bytes + 1)[: self._max_read_bytes]
        except OSError as exc:
            raise HttpError(422, f"error reading file: {exc.strerror}") from exc

    def _listing(self, path: str) -> dict[str, object]:
        files: list[dict[str, object]] = []
        subdirectories: list[dict[str, object]] = []
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as exc:
            raise HttpError(422, f"error listing directory: {exc.strerror}") from exc
        for entry in entries:
            child = posixpath.join(path, entry.name)
            if entry.is_dir():
                subdirectories.append({"path": child, "name": entry.name})
                continue
            try:
                files.append(self._file_entry(child, entry.stat()))
            except OSError:
                continue  # a dangling link or a file removed meanwhile
        name = posixpath.basename(path) or "/"
        return {"name": name, "path": path, "files": files, "subdirectories": subdirectories}

    @staticmethod
    def _file_entry(path: str, info: os.stat_result) -> dict[str, object]:
        return {
            "path": path,
            "name": posixpath.basename(path),
            "size": info.st_size,
            "permissions": f"{stat.S_IMODE(info.st_mode):o}",
            "lastModified": _utc(info.st_mtime),
        }

    def put(self, request: Request, raw: str) -> Reply:
        """Create or replace a file (multipart field ``file``, or JSON ``content``), or
        create a directory (JSON ``isDirectory``); parent directories are created."""
        path = self.resolve(raw)
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("multipart/form-data"):
            data, mode = _multipart_file(request.body, content_type)
        else:
            body = request.json()
            if not isinstance(body, dict):
                raise HttpError(400, "body must be a JSON object")
            mode = _mode(body.get("permissions") or "")
            if body.get("isDirectory"):
                return self._mkdir(path, mode or 0o755)
            data = str(body.get("content", "")).encode()
        return self._write(path, data, mode or 0o644)

    def _mkdir(self, path: str, mode: int) -> Reply:
        try:
            os.makedirs(path, mode, exist_ok=True)
        except OSError as exc:
            raise HttpError(422, f"error creating directory: {exc.strerror}") from exc
        return Reply.of_json({"message": "Directory created successfully", "path": path})

    def _write(self, path: str, data: bytes, mode: int) -> Reply:
        """Write whole or not at all: a temporary file renamed over ``path``, so a write
        that fails (no space left) leaves the old content and no partial file."""
        directory = posixpath.dirname(path)
        temp = f"{directory}/.{posixpath.basename(path)}.{os.getpid()}.{time.monotonic_ns()}"
        try:
            os.makedirs(directory, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):  # an existing file keeps its mode
                mode = stat.S_IMODE(os.stat(path).st_mode)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with open(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise HttpError(422, f"error writing file: {exc.strerror}") from exc
        return Reply.of_json({"message": "File created/updated successfully", "path": path})

    def delete(self, request: Request, raw: str) -> Reply:
        """Delete a file, an empty directory, or (``?recursive=true``) a directory tree."""
        path = self.resolve(raw)
        if path == self._real_root:
            raise HttpError(400, "the root directory cannot be deleted")
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                self._rmdir(path, request.query.get("recursive") == "true")
            else:
                os.unlink(path)
        except FileNotFoundError as exc:
            raise HttpError(404, "file or directory not found") from exc
        except OSError as exc:
            raise HttpError(422, f"error deleting: {exc.strerror}") from exc
        return Reply.of_json({"message": "Deleted successfully", "path": path})

    @staticmethod
    def _rmdir(path: str, recursive: bool) -> None:
        if not recursive:
            os.rmdir(path)
            return
        import shutil  # only here: its import cost is not worth paying at start-up

        shutil.rmtree(path)


def _mode(text: str) -> int:
    try:
        return int(text, 8) if text else 0
    except ValueError as exc:
        raise HttpError(400, f"invalid permissions format '{text}'") from exc


def _multipart_file(body: bytes, content_type: str) -> tuple[bytes, int]:
    """The ``file`` part's bytes and the ``permissions`` part's mode (0 when absent)."""
    boundary = content_type.partition("boundary=")[2].strip().strip('"')
    if not boundary:
        raise HttpError(400, "multipart body without a boundary")
    data: bytes | None = None
    mode = 0
    for part in body.split(b"--" + boundary.encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.partition(b"\r\n\r\n")
        content = content.removesuffix(b"\r\n")
        disposition = head.decode("latin-1").lower()
        if 'name="file"' in disposition:
            data = content
        elif 'name="permissions"' in disposition:
            mode = _mode(content.decode("latin-1").strip())
    if data is None:
        raise HttpError(400, "missing 'file' field in multipart form")
    return data, mode
