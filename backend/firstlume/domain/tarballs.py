"""Configuration tarballs (what `terraform plan` uploads from a `cloud` block's directory), read
safely: nothing may land outside the directory it is unpacked in, and a tarball too large or with
too many files is refused before anything is written.

`check_tarball` is the control plane's gate (a refused upload stores nothing); `extract_tarball`
is the executor's, which checks again as it writes, member by member."""

from __future__ import annotations

import io
import posixpath
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# A root module with its modules and lock file is a few hundred files of a few MB.
MAX_FILES = 5000
MAX_UNPACKED_BYTES = 200 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"


class UnsafeTarball(ValueError):
    """The tarball is refused; the message says why, in a sentence a person understands."""


@dataclass(frozen=True)
class TarballSummary:
    files: int
    unpacked_bytes: int


def _members(data: bytes) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    if not data.startswith(GZIP_MAGIC):
        raise UnsafeTarball("The configuration must be a gzip-compressed tar archive (.tar.gz).")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            while True:
                member = archive.next()
                if member is None:
                    return
                yield archive, member
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise UnsafeTarball(f"The configuration is not a readable .tar.gz archive ({error}).") from None


def _safe_name(name: str) -> str:
    """The member's path inside the directory, or UnsafeTarball when it would leave it."""
    cleaned = posixpath.normpath(name.replace("\\", "/")).lstrip("/") if name else ""
    if name.startswith("/") or cleaned == ".." or cleaned.startswith("../") or "\x00" in name:
        raise UnsafeTarball(f"The archive's entry {name!r} points outside the configuration's directory.")
    return cleaned


def _check_link(member: tarfile.TarInfo, path: str) -> None:
    target = member.linkname.replace("\\", "/")
    if target.startswith("/"):
        raise UnsafeTarball(
            f"The archive's link {member.name!r} points outside the configuration's directory."
        )
    base = posixpath.dirname(path) if member.issym() else ""
    resolved = posixpath.normpath(posixpath.join(base, target))
    if resolved == ".." or resolved.startswith("../"):
        raise UnsafeTarball(
            f"The archive's link {member.name!r} points outside the configuration's directory."
        )


def _checked(member: tarfile.TarInfo, files: int, unpacked: int) -> tuple[str, int, int]:
    path = _safe_name(member.name)
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeTarball(f"The archive's entry {member.name!r} is neither a file, a directory nor a link.")
    if member.issym() or member.islnk():
        _check_link(member, path)
    files += 1
    if files > MAX_FILES:
        raise UnsafeTarball(f"The configuration has more than {MAX_FILES} entries.")
    unpacked += max(member.size, 0)
    if unpacked > MAX_UNPACKED_BYTES:
        raise UnsafeTarball(
            f"The configuration unpacks to more than {MAX_UNPACKED_BYTES // (1024 * 1024)} MiB."
        )
    return path, files, unpacked


def check_tarball(data: bytes) -> TarballSummary:
    """Reads every header (and so every byte: gzip streams have no index) without writing."""
    files = unpacked = 0
    for _, member in _members(data):
        _, files, unpacked = _checked(member, files, unpacked)
    return TarballSummary(files=files, unpacked_bytes=unpacked)


def extract_tarball(data: bytes, destination: Path) -> TarballSummary:
    """Unpacks into `destination` (which must exist), checking each member as it goes; symbolic
    links are written only when they stay inside, and hard links become copies."""
    root = destination.resolve()
    files = unpacked = 0
    for archive, member in _members(data):
        path, files, unpacked = _checked(member, files, unpacked)
        if path in ("", "."):
            continue
        target = (root / path).resolve() if not member.issym() else root / path
        if not (target == root or target.is_relative_to(root)) or not target.parent.resolve().is_relative_to(
            root
        ):
            raise UnsafeTarball(
                f"The archive's entry {member.name!r} points outside the configuration's directory."
            )
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if member.issym():
            target.symlink_to(member.linkname)
            continue
        if member.islnk():
            source = (root / _safe_name(member.linkname)).resolve()
            if not source.is_relative_to(root) or not source.is_file():
                raise UnsafeTarball(
                    f"The archive's link {member.name!r} names no file inside the configuration."
                )
            target.write_bytes(source.read_bytes())
            continue
        content = archive.extractfile(member)
        if content is None:
            raise UnsafeTarball(f"The archive's entry {member.name!r} cannot be read.")
        with content, open(target, "wb") as out:
            while chunk := content.read(1024 * 1024):
                out.write(chunk)
        target.chmod(0o755 if member.mode & 0o111 else 0o644)
    return TarballSummary(files=files, unpacked_bytes=unpacked)
