"""Read a reviewed file safely (contract §5): no symlinks, no races, no special files, bounded.

The path is walked from `/` one component at a time with `dir_fd` and `O_NOFOLLOW`, so no
component can be a symlink and nothing on the way can be swapped between a check and a use.
The file is opened without following links and non-blocking (a FIFO cannot hang the server),
checked with `fstat`, read once up to the cap, and checked again afterwards. The bytes returned
are the only bytes ever read: the caller hashes and sends exactly these.

Every refusal names the check that failed and never the file's content.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from ito_training_mcp.envelope import ErrorCode
from ito_training_mcp.errors import ManifestRefusal

MAX_PATH_CHARS = 4096
MAX_COMPONENT_BYTES = 255
_READ_CHUNK = 256 * 1024
_SPECIAL_TREES = ("/proc", "/sys", "/dev")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def is_normalised_absolute(path: str) -> bool:
    """Absolute, no NUL, no empty, '.' or '..' component, no trailing slash (except '/' itself)."""
    if not path.startswith("/") or "\x00" in path:
        return False
    if path == "/":
        return True
    return all(part not in ("", ".", "..") for part in path[1:].split("/"))


@dataclass(frozen=True)
class FileBytes:
    """What was read: the canonical path, the exact bytes, and their SHA-256."""

    path: str
    content: bytes
    sha256: str

    @property
    def size_bytes(self) -> int:
        return len(self.content)


@dataclass(frozen=True)
class ReadHooks:
    """Test seams to inject a change at a precise moment. Never reachable from a tool argument."""

    after_open: Callable[[], None] | None = None
    after_read: Callable[[], None] | None = None


def _refuse(code: ErrorCode, message: str, check: str) -> ManifestRefusal:
    return ManifestRefusal(code, message, check=check)


def special_devices() -> frozenset[int]:
    devices: set[int] = set()
    for tree in _SPECIAL_TREES:
        try:
            devices.add(os.stat(tree).st_dev)
        except OSError:
            continue
    return frozenset(devices)


def validate_path_text(path: object, roots: tuple[str, ...] | None) -> str:
    """The lexical checks: a string, absolute, normalised, bounded, inside the allowed roots."""
    if not isinstance(path, str):
        raise _refuse(ErrorCode.MANIFEST_PATH_INVALID, "The manifest path must be a string.", "type")
    if "\x00" in path:
        raise _refuse(ErrorCode.MANIFEST_PATH_INVALID, "The manifest path contains a NUL byte.", "nul")
    if len(path) > MAX_PATH_CHARS:
        raise _refuse(ErrorCode.MANIFEST_PATH_INVALID, "The manifest path is too long.", "length")
    if not path.startswith("/"):
        raise _refuse(ErrorCode.MANIFEST_PATH_INVALID, "The manifest path must be absolute.", "absolute")
    if path == "/" or not is_normalised_absolute(path):
        raise _refuse(
            ErrorCode.MANIFEST_PATH_INVALID,
            "The manifest path must be normalised: no '.', '..' or empty components and no trailing '/'.",
            "normalised",
        )
    try:
        path.encode("utf-8")  # lone surrogates (undecodable argv bytes) are not a path we can report on
        encoded = [os.fsencode(part) for part in path[1:].split("/")]
    except UnicodeError:
        raise _refuse(ErrorCode.MANIFEST_PATH_INVALID, "The manifest path is not valid UTF-8 text.",
                      "encoding") from None
    if any(len(part) > MAX_COMPONENT_BYTES for part in encoded):
        raise _refuse(ErrorCode.MANIFEST_PATH_INVALID, "A path component is too long.", "length")
    if roots is not None and not any(path.startswith(root.rstrip("/") + "/") for root in roots):
        raise _refuse(
            ErrorCode.MANIFEST_PATH_INVALID,
            "The manifest path is outside the directories allowed by ITO_TRAINING_MANIFEST_ROOTS.",
            "roots",
        )
    if any(path == tree or path.startswith(tree + "/") for tree in _SPECIAL_TREES):
        raise _refuse(
            ErrorCode.MANIFEST_NOT_REGULAR, "Files under /proc, /sys and /dev are refused.", "special_tree"
        )
    return path


def _check_directory(st: os.stat_result, uid: int, where: str) -> None:
    if st.st_uid not in (0, uid):
        raise _refuse(
            ErrorCode.MANIFEST_UNSAFE_OWNER,
            f"A directory on the path ({where}) is owned by another user.",
            "directory_owner",
        )
    writable_by_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    sticky_root = st.st_uid == 0 and st.st_mode & stat.S_ISVTX
    if writable_by_others and not sticky_root:
        raise _refuse(
            ErrorCode.MANIFEST_UNSAFE_PERMISSIONS,
            f"A directory on the path ({where}) is writable by group or others.",
            "directory_permissions",
        )


def _lstat_at(name: str, dir_fd: int, where: str) -> os.stat_result:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise _refuse(ErrorCode.MANIFEST_NOT_FOUND, f"The path does not exist ({where}).", "exists") from None
    except PermissionError:
        raise _refuse(
            ErrorCode.MANIFEST_NOT_FOUND, f"The path cannot be accessed ({where}).", "access"
        ) from None
    except OSError as exc:
        reason = errno.errorcode.get(exc.errno or 0, "error")
        message = f"The path cannot be resolved ({where}, {reason})."
        raise _refuse(ErrorCode.MANIFEST_NOT_FOUND, message, "resolve") from None


def _open_dir_at(name: str, dir_fd: int, expected: os.stat_result, where: str) -> int:
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(
                ErrorCode.MANIFEST_SYMLINK, f"A directory on the path became a symlink ({where}).", "symlink"
            ) from None
        raise _refuse(
            ErrorCode.MANIFEST_CHANGED, f"A directory on the path changed while opening it ({where}).", "swap"
        ) from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
        os.close(fd)
        raise _refuse(
            ErrorCode.MANIFEST_CHANGED, f"A directory on the path was swapped while opening it ({where}).", "swap"
        )
    return fd


def read_regular_file(
    path: object,
    *,
    max_bytes: int,
    roots: tuple[str, ...] | None = None,
    require_mode_0600: bool = False,
    hooks: ReadHooks | None = None,
    on_read: Callable[[bytes], None] | None = None,
) -> FileBytes:
    """Read `path` under every check of contract §5, or raise `ManifestRefusal`. `on_read`: called
    with the bytes once every check has passed, before they are hashed (the caller can start on
    them meanwhile; the `FileBytes` returned hold that very object)."""
    text = validate_path_text(path, roots)
    components = text[1:].split("/")
    uid = os.geteuid()
    special = special_devices()
    hooks = hooks or ReadHooks()

    dir_fd = walk_to_parent(components, uid)
    try:
        read = _read_leaf(text, components[-1], dir_fd, uid, special, max_bytes, require_mode_0600, hooks)
    finally:
        os.close(dir_fd)
    _confirm_path_still_names(components, uid, read.identity)
    if on_read is not None:
        on_read(read.content)
    return FileBytes(path=text, content=read.content, sha256=hashlib.sha256(read.content).hexdigest())


def walk_to_parent(components: list[str], uid: int) -> int:
    """Open each directory with dir_fd + O_NOFOLLOW from '/', checking it; return the parent's fd.
    Refusals name the failing component by its position, never by its text."""
    dir_fd = os.open("/", _DIR_FLAGS)
    try:
        _check_directory(os.fstat(dir_fd), uid, "the root directory")
        for index, name in enumerate(components[:-1], start=1):
            # Named by position, never by text: the path is an agent's argument and is not echoed.
            walked = f"path component {index}"
            st = _lstat_at(name, dir_fd, walked)
            if stat.S_ISLNK(st.st_mode):
                raise _refuse(ErrorCode.MANIFEST_SYMLINK, f"A directory on the path is a symlink ({walked}).",
                              "symlink")
            if not stat.S_ISDIR(st.st_mode):
                raise _refuse(ErrorCode.MANIFEST_NOT_FOUND, f"A path component is not a directory ({walked}).",
                              "exists")
            next_fd = _open_dir_at(name, dir_fd, st, walked)
            os.close(dir_fd)
            dir_fd = next_fd
            _check_directory(os.fstat(dir_fd), uid, walked)
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd


def _confirm_path_still_names(components: list[str], uid: int, identity: tuple[int, int]) -> None:
    """After the read, walk the whole path again (no symlinks anywhere) to the same inode."""
    try:
        dir_fd = walk_to_parent(components, uid)
    except ManifestRefusal:
        raise _refuse(ErrorCode.MANIFEST_CHANGED, "The path changed while the file was read.", "path_swap") from None
    try:
        leaf = os.stat(components[-1], dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        leaf = None
    finally:
        os.close(dir_fd)
    if leaf is None or (leaf.st_dev, leaf.st_ino) != identity:
        raise _refuse(ErrorCode.MANIFEST_CHANGED, "The path no longer names the file that was read.", "path_swap")


@dataclass(frozen=True)
class _Read:
    content: bytes
    identity: tuple[int, int]


def _read_leaf(
    path: str,
    name: str,
    dir_fd: int,
    uid: int,
    special: frozenset[int],
    max_bytes: int,
    require_mode_0600: bool,
    hooks: ReadHooks,
) -> _Read:
    before_open = _lstat_at(name, dir_fd, "the file")
    if stat.S_ISLNK(before_open.st_mode):
        raise _refuse(ErrorCode.MANIFEST_SYMLINK, "The file is a symlink.", "symlink")
    if not stat.S_ISREG(before_open.st_mode):
        # Refuse before opening: opening some devices has side effects.
        raise _refuse(
            ErrorCode.MANIFEST_NOT_REGULAR, "The path is not a regular file (directory, FIFO, socket or device).",
            "regular",
        )
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(ErrorCode.MANIFEST_SYMLINK, "The file became a symlink.", "symlink") from None
        if exc.errno == errno.ENOENT:
            raise _refuse(ErrorCode.MANIFEST_CHANGED, "The file disappeared while opening it.", "swap") from None
        raise _refuse(ErrorCode.MANIFEST_NOT_FOUND, "The file cannot be opened.", "open") from None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before_open.st_dev, before_open.st_ino):
            raise _refuse(ErrorCode.MANIFEST_CHANGED, "The file was swapped while opening it.", "swap")
        _check_opened_file(st, uid, special, max_bytes, require_mode_0600)
        if hooks.after_open is not None:
            hooks.after_open()
        content = _read_bounded(fd, max_bytes, st.st_size)
        if hooks.after_read is not None:
            hooks.after_read()
        after = os.fstat(fd)
    finally:
        os.close(fd)

    if _identity(after) != _identity(st):
        raise _refuse(ErrorCode.MANIFEST_CHANGED, "The file changed while it was read.", "stable")
    if len(content) != after.st_size:
        raise _refuse(ErrorCode.MANIFEST_CHANGED, "The bytes read do not match the file size.", "stable")
    return _Read(content, (st.st_dev, st.st_ino))


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _check_opened_file(
    st: os.stat_result, uid: int, special: frozenset[int], max_bytes: int, require_mode_0600: bool
) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(ErrorCode.MANIFEST_NOT_REGULAR, "The opened file is not a regular file.", "regular")
    if st.st_dev in special:
        raise _refuse(
            ErrorCode.MANIFEST_NOT_REGULAR, "Files on /proc, /sys and /dev are refused.", "special_filesystem"
        )
    if st.st_uid != uid:
        raise _refuse(ErrorCode.MANIFEST_UNSAFE_OWNER, "The file is not owned by the current user.", "owner")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _refuse(
            ErrorCode.MANIFEST_UNSAFE_PERMISSIONS, "The file is writable by group or others.", "permissions"
        )
    if require_mode_0600 and stat.S_IMODE(st.st_mode) & 0o077:
        raise _refuse(
            ErrorCode.MANIFEST_UNSAFE_PERMISSIONS, "The file must be mode 0600 (no group or other access).",
            "mode_0600",
        )
    if st.st_nlink != 1:
        raise _refuse(ErrorCode.MANIFEST_UNSAFE_PERMISSIONS, "The file has more than one hard link.", "hard_links")
    if st.st_size > max_bytes:
        raise _refuse(
            ErrorCode.MANIFEST_TOO_LARGE, f"The file is larger than the cap of {max_bytes} bytes.", "size"
        )


def _read_bounded(fd: int, max_bytes: int, expected: int = 0) -> bytes:
    """Read at most max_bytes + 1 bytes: never trust st_size alone. `expected` (st_size) sizes the
    first read, so that a file that did not change comes in one read, with no copy."""
    chunks: list[bytes] = []
    total = 0
    limit = max_bytes + 1
    size = expected + 1 if expected > 0 else _READ_CHUNK
    while total < limit:
        try:
            chunk = os.read(fd, min(size, limit - total))
        except BlockingIOError:
            raise _refuse(ErrorCode.MANIFEST_NOT_REGULAR, "The file would block on read.", "regular") from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        size = _READ_CHUNK
    if total > max_bytes:
        raise _refuse(
            ErrorCode.MANIFEST_TOO_LARGE, f"The file is larger than the cap of {max_bytes} bytes.", "size"
        )
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
