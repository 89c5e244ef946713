"""Gate 2, the secure read (contract §5), driven through the service with real files.

Every refusal is checked the same way: not ok, the expected code, the manifest gate, nothing
sent, and the file's content (a distinctive marker written into it) absent from the message and
from the whole envelope. Races are injected deterministically through `ReadHooks`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from ito_training_mcp.envelope import Envelope, ErrorCode
from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.files import ReadHooks, read_regular_file
from ito_training_mcp.gates.config import ManifestSettings
from ito_training_mcp.gates.manifest.digest import digest_manifest_file
from ito_training_mcp.service import TrainingService

from .conftest import assert_manifest_refused

MIB = 1024 * 1024
OTHER_UID = 12345
MARKER = "ZQX-file-gate-content-marker-5d1f"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")


# ---------------------------------------------------------------------------- helpers


def marked_document(example_document: dict[str, Any], marker: str = MARKER) -> dict[str, Any]:
    doc = json.loads(json.dumps(example_document))
    doc["description"] = f"reviewed plan {marker}"
    return doc


def marked_bytes(example_document: dict[str, Any], marker: str = MARKER) -> bytes:
    return json.dumps(marked_document(example_document, marker), indent=2).encode()


def write_marked(directory: Path, example_document: dict[str, Any], name: str = "manifest.json") -> Path:
    path = directory / name
    path.write_bytes(marked_bytes(example_document))
    os.chmod(path, 0o600)
    return path


def assert_refused(env: Envelope, code: str, marker: str | None = MARKER) -> None:
    assert_manifest_refused(env, code, *([] if marker is None else [marker]))


def assert_digested(env: Envelope, path: str, content: bytes) -> None:
    assert env.ok is True, env.to_json()
    assert env.error is None
    assert env.live_api_contacted is False
    assert env.data is not None
    assert {"path", "sha256", "size_bytes", "review", "review_text"} <= set(env.data)
    assert env.data["path"] == path
    assert env.data["sha256"] == hashlib.sha256(content).hexdigest()
    assert env.data["size_bytes"] == len(content)


@pytest.fixture
def marked_path(safe_dir: Path, example_document: dict[str, Any]) -> str:
    return str(write_marked(safe_dir, example_document))


@pytest.fixture
def short_tmp_dir() -> Iterator[Path]:
    """A private directory with a short path (AF_UNIX paths are limited to ~107 bytes)."""
    d = Path(tempfile.mkdtemp(dir="/tmp"))
    os.chmod(d, 0o700)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------- success


async def test_example_manifest_digests(service: TrainingService, marked_path: str,
                                        example_document: dict[str, Any]) -> None:
    env = await service.digest_manifest(marked_path)
    assert_digested(env, marked_path, marked_bytes(example_document))
    assert env.data is not None
    assert env.data["sha256"] in env.data["review_text"]
    assert len(env.data["sha256"]) == 64
    assert env.data["sha256"] == env.data["sha256"].lower()


def test_read_regular_file_returns_exact_bytes(marked_path: str, example_document: dict[str, Any]) -> None:
    expected = marked_bytes(example_document)
    read = read_regular_file(marked_path, max_bytes=MIB)
    assert read.content == expected
    assert read.sha256 == hashlib.sha256(expected).hexdigest()
    assert read.size_bytes == len(expected)
    assert read.path == marked_path


# ---------------------------------------------------------------------------- lexical path checks


def _relative(path: str) -> str:
    return path.lstrip("/")


def _dotdot(path: str) -> str:
    p = Path(path)
    return f"{p.parent}/../{p.parent.name}/{p.name}"


def _dot(path: str) -> str:
    p = Path(path)
    return f"{p.parent}/./{p.name}"


def _empty_component(path: str) -> str:
    p = Path(path)
    return f"{p.parent}//{p.name}"


def _trailing_slash(path: str) -> str:
    return path + "/"


def _nul(path: str) -> str:
    return path + "\x00.txt"


def _nul_inside(path: str) -> str:
    p = Path(path)
    return f"{p.parent}\x00/{p.name}"


@pytest.mark.parametrize(
    "mangle",
    [_relative, _dotdot, _dot, _empty_component, _trailing_slash, _nul, _nul_inside],
    ids=["relative", "dotdot", "dot", "empty-component", "trailing-slash", "nul-suffix", "nul-inside"],
)
async def test_path_not_normalised_is_refused(
    service: TrainingService, marked_path: str, mangle: Callable[[str], str]
) -> None:
    env = await service.digest_manifest(mangle(marked_path))
    assert_refused(env, "MANIFEST_PATH_INVALID")


async def test_root_itself_is_refused(service: TrainingService) -> None:
    assert_refused(await service.digest_manifest("/"), "MANIFEST_PATH_INVALID", marker=None)


async def test_overlong_component_is_refused(service: TrainingService, safe_dir: Path) -> None:
    assert_refused(await service.digest_manifest(f"{safe_dir}/{'a' * 300}"), "MANIFEST_PATH_INVALID", marker=None)


# ---------------------------------------------------------------------------- symlinks


async def test_symlink_as_last_component(service: TrainingService, safe_dir: Path,
                                         example_document: dict[str, Any]) -> None:
    target = write_marked(safe_dir, example_document, "real.json")
    link = safe_dir / "link.json"
    link.symlink_to(target)
    assert_refused(await service.digest_manifest(str(link)), "MANIFEST_SYMLINK")


async def test_symlink_as_parent_directory(service: TrainingService, safe_dir: Path,
                                           example_document: dict[str, Any]) -> None:
    real = safe_dir / "real"
    real.mkdir(mode=0o700)
    write_marked(real, example_document)
    link = safe_dir / "linkdir"
    link.symlink_to(real, target_is_directory=True)
    assert_refused(await service.digest_manifest(str(link / "manifest.json")), "MANIFEST_SYMLINK")


async def test_dangling_symlink_is_a_symlink_not_missing(service: TrainingService, safe_dir: Path) -> None:
    link = safe_dir / "dangling.json"
    link.symlink_to(safe_dir / "nowhere.json")
    assert_refused(await service.digest_manifest(str(link)), "MANIFEST_SYMLINK", marker=None)


# ---------------------------------------------------------------------------- not a regular file


async def test_directory_is_not_regular(service: TrainingService, safe_dir: Path) -> None:
    d = safe_dir / "adir.json"
    d.mkdir(mode=0o700)
    assert_refused(await service.digest_manifest(str(d)), "MANIFEST_NOT_REGULAR", marker=None)


async def test_fifo_is_refused_promptly(service: TrainingService, safe_dir: Path) -> None:
    fifo = safe_dir / "pipe.json"
    os.mkfifo(fifo, 0o600)
    with anyio.fail_after(5):
        env = await service.digest_manifest(str(fifo))
    assert_refused(env, "MANIFEST_NOT_REGULAR", marker=None)


def test_fifo_is_refused_by_read_regular_file(safe_dir: Path) -> None:
    fifo = safe_dir / "pipe.json"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ManifestRefusal) as info:
        read_regular_file(str(fifo), max_bytes=MIB)
    assert info.value.code is ErrorCode.MANIFEST_NOT_REGULAR


async def test_proc_self_environ_is_refused(service: TrainingService) -> None:
    env = await service.digest_manifest("/proc/self/environ")
    assert_refused(env, "MANIFEST_NOT_REGULAR", marker=None)
    assert "PATH=" not in env.to_json()


async def test_character_device_dev_null_is_refused(service: TrainingService) -> None:
    assert_refused(await service.digest_manifest("/dev/null"), "MANIFEST_NOT_REGULAR", marker=None)


async def test_character_device_outside_dev_is_refused(service: TrainingService, safe_dir: Path) -> None:
    node = safe_dir / "null.json"
    try:
        os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    assert_refused(await service.digest_manifest(str(node)), "MANIFEST_NOT_REGULAR", marker=None)


async def test_unix_socket_is_refused(service: TrainingService, short_tmp_dir: Path) -> None:
    path = short_tmp_dir / "s.json"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        with anyio.fail_after(5):
            env = await service.digest_manifest(str(path))
    assert_refused(env, "MANIFEST_NOT_REGULAR", marker=None)


async def test_parent_component_is_a_file(service: TrainingService, marked_path: str) -> None:
    env = await service.digest_manifest(f"{marked_path}/inner.json")
    assert_refused(env, "MANIFEST_NOT_FOUND")


# ---------------------------------------------------------------------------- links, permissions, owners


async def test_second_hard_link_is_refused(service: TrainingService, marked_path: str, safe_dir: Path) -> None:
    os.link(marked_path, safe_dir / "second-name.json")
    assert_refused(await service.digest_manifest(marked_path), "MANIFEST_UNSAFE_PERMISSIONS")


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o622, 0o660], ids=oct)
async def test_group_or_other_writable_file_is_refused(service: TrainingService, marked_path: str,
                                                       mode: int) -> None:
    os.chmod(marked_path, mode)
    assert_refused(await service.digest_manifest(marked_path), "MANIFEST_UNSAFE_PERMISSIONS")


@pytest.mark.parametrize("mode", [0o400, 0o600, 0o644, 0o640], ids=oct)
async def test_readable_but_not_writable_by_others_is_accepted(
    service: TrainingService, marked_path: str, mode: int, example_document: dict[str, Any]
) -> None:
    os.chmod(marked_path, mode)
    assert_digested(await service.digest_manifest(marked_path), marked_path, marked_bytes(example_document))


@needs_root
async def test_file_owned_by_another_user_is_refused(service: TrainingService, marked_path: str) -> None:
    os.chown(marked_path, OTHER_UID, -1)
    assert_refused(await service.digest_manifest(marked_path), "MANIFEST_UNSAFE_OWNER")


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702], ids=oct)
async def test_parent_directory_writable_by_others_is_refused(
    service: TrainingService, marked_path: str, safe_dir: Path, mode: int
) -> None:
    os.chmod(safe_dir, mode)
    assert_refused(await service.digest_manifest(marked_path), "MANIFEST_UNSAFE_PERMISSIONS")


async def test_ancestor_directory_writable_by_others_is_refused(
    service: TrainingService, safe_dir: Path, example_document: dict[str, Any]
) -> None:
    inner = safe_dir / "a" / "b"
    inner.mkdir(parents=True, mode=0o700)
    os.chmod(safe_dir / "a", 0o700)
    path = write_marked(inner, example_document)
    os.chmod(safe_dir / "a", 0o777)
    assert_refused(await service.digest_manifest(str(path)), "MANIFEST_UNSAFE_PERMISSIONS")


@needs_root
async def test_parent_directory_owned_by_another_user_is_refused(
    service: TrainingService, marked_path: str, safe_dir: Path
) -> None:
    os.chown(safe_dir, OTHER_UID, -1)
    assert_refused(await service.digest_manifest(marked_path), "MANIFEST_UNSAFE_OWNER")


@needs_root
async def test_sticky_world_writable_root_owned_directory_is_allowed(
    service: TrainingService, safe_dir: Path, example_document: dict[str, Any]
) -> None:
    shared = safe_dir / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    st = os.stat(shared)
    assert st.st_uid == 0
    assert stat.S_IMODE(st.st_mode) == 0o1777
    path = write_marked(shared, example_document)
    assert_digested(await service.digest_manifest(str(path)), str(path), marked_bytes(example_document))


@needs_root
async def test_sticky_world_writable_directory_of_another_user_is_refused(
    service: TrainingService, safe_dir: Path, example_document: dict[str, Any]
) -> None:
    shared = safe_dir / "shared"
    shared.mkdir()
    path = write_marked(shared, example_document)
    os.chmod(shared, 0o1777)
    os.chown(shared, OTHER_UID, -1)
    env = await service.digest_manifest(str(path))
    assert_refused(env, "MANIFEST_UNSAFE_OWNER")


async def test_non_sticky_world_writable_directory_is_refused(
    service: TrainingService, safe_dir: Path, example_document: dict[str, Any]
) -> None:
    shared = safe_dir / "shared"
    shared.mkdir()
    path = write_marked(shared, example_document)
    os.chmod(shared, 0o777)
    assert_refused(await service.digest_manifest(str(path)), "MANIFEST_UNSAFE_PERMISSIONS")


# ---------------------------------------------------------------------------- missing


async def test_missing_file(service: TrainingService, safe_dir: Path) -> None:
    assert_refused(await service.digest_manifest(str(safe_dir / "absent.json")), "MANIFEST_NOT_FOUND", marker=None)


async def test_missing_parent(service: TrainingService, safe_dir: Path) -> None:
    env = await service.digest_manifest(str(safe_dir / "no-such-dir" / "manifest.json"))
    assert_refused(env, "MANIFEST_NOT_FOUND", marker=None)


# ---------------------------------------------------------------------------- size cap


async def test_file_larger_than_cap(safe_dir: Path) -> None:
    path = safe_dir / "big.json"
    path.write_bytes((MARKER.encode() + b" ") * (4096 // (len(MARKER) + 1) + 1))
    os.chmod(path, 0o600)
    assert path.stat().st_size >= 4096
    service = TrainingService({"ITO_TRAINING_MANIFEST_MAX_BYTES": "2048"})
    assert_refused(await service.digest_manifest(str(path)), "MANIFEST_TOO_LARGE")


async def test_file_exactly_at_cap_is_accepted(safe_dir: Path, example_document: dict[str, Any]) -> None:
    doc = marked_document(example_document)
    base = json.dumps(doc).encode()
    doc["description"] += "x" * (2048 - len(base))
    content = json.dumps(doc).encode()
    assert len(content) == 2048
    path = safe_dir / "cap.json"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    service = TrainingService({"ITO_TRAINING_MANIFEST_MAX_BYTES": "2048"})
    assert_digested(await service.digest_manifest(str(path)), str(path), content)
    path.write_bytes(content + b" ")
    assert_refused(await service.digest_manifest(str(path)), "MANIFEST_TOO_LARGE")


async def test_sparse_ten_gib_file_is_refused_promptly(service: TrainingService, marked_path: str) -> None:
    os.truncate(marked_path, 10 * 1024**3)
    with anyio.fail_after(5):
        env = await service.digest_manifest(marked_path)
    assert_refused(env, "MANIFEST_TOO_LARGE")


def test_growing_beyond_cap_after_fstat_is_refused_by_bytes_read(safe_dir: Path) -> None:
    """The cap holds by bytes read too, not only by st_size."""
    path = safe_dir / "grow.json"
    path.write_bytes(b"{}")
    os.chmod(path, 0o600)

    def grow() -> None:
        with open(path, "ab") as f:
            f.write(b" " * 4096)

    with pytest.raises(ManifestRefusal) as info:
        read_regular_file(str(path), max_bytes=1024, hooks=ReadHooks(after_open=grow))
    assert info.value.code is ErrorCode.MANIFEST_TOO_LARGE


# ---------------------------------------------------------------------------- ITO_TRAINING_MANIFEST_ROOTS


async def test_roots_elsewhere_refuses(marked_path: str, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir(mode=0o700)
    service = TrainingService({"ITO_TRAINING_MANIFEST_ROOTS": str(other)})
    assert_refused(await service.digest_manifest(marked_path), "MANIFEST_PATH_INVALID")


async def test_roots_prefix_is_not_a_parent(marked_path: str, safe_dir: Path) -> None:
    """A root of /x/manifest must not admit /x/manifests/... (string prefix, not a directory)."""
    service = TrainingService({"ITO_TRAINING_MANIFEST_ROOTS": str(safe_dir)[:-1]})
    assert_refused(await service.digest_manifest(marked_path), "MANIFEST_PATH_INVALID")


async def test_roots_containing_the_file_accepts(marked_path: str, safe_dir: Path, tmp_path: Path,
                                                 example_document: dict[str, Any]) -> None:
    service = TrainingService({"ITO_TRAINING_MANIFEST_ROOTS": f"{tmp_path / 'elsewhere'}:{safe_dir}"})
    assert_digested(await service.digest_manifest(marked_path), marked_path, marked_bytes(example_document))


# ---------------------------------------------------------------------------- changes during the read


def _read_direct(path: str, hooks: ReadHooks) -> object:
    return read_regular_file(path, max_bytes=MIB, hooks=hooks)


def _digest_direct(path: str, hooks: ReadHooks) -> object:
    return digest_manifest_file(path, ManifestSettings.from_env({}), hooks=hooks)


READERS = pytest.mark.parametrize("reader", [_read_direct, _digest_direct], ids=["read_regular_file", "digest"])
Reader = Callable[[str, ReadHooks], object]


def _assert_changed(info: pytest.ExceptionInfo[ManifestRefusal]) -> None:
    refusal = info.value
    assert refusal.code is ErrorCode.MANIFEST_CHANGED
    assert refusal.gate is not None
    assert refusal.gate.value == "manifest"
    assert MARKER not in str(refusal)
    assert MARKER not in refusal.message
    envelope = refusal.envelope(live_api_contacted=False)
    assert MARKER not in envelope.to_json()


@READERS
def test_hooks_without_change_read_the_file(reader: Reader, marked_path: str) -> None:
    calls: list[str] = []
    reader(marked_path, ReadHooks(after_open=lambda: calls.append("open"), after_read=lambda: calls.append("read")))
    assert calls == ["open", "read"]


@READERS
def test_append_after_open_is_changed(reader: Reader, marked_path: str) -> None:
    def append() -> None:
        with open(marked_path, "ab") as f:
            f.write(b"\n")

    with pytest.raises(ManifestRefusal) as info:
        reader(marked_path, ReadHooks(after_open=append))
    _assert_changed(info)


@READERS
def test_truncate_after_open_is_changed(reader: Reader, marked_path: str) -> None:
    def shrink() -> None:
        os.truncate(marked_path, 10)

    with pytest.raises(ManifestRefusal) as info:
        reader(marked_path, ReadHooks(after_open=shrink))
    _assert_changed(info)


@READERS
def test_append_after_read_is_changed(reader: Reader, marked_path: str) -> None:
    def append() -> None:
        with open(marked_path, "ab") as f:
            f.write(b"\n")

    with pytest.raises(ManifestRefusal) as info:
        reader(marked_path, ReadHooks(after_read=append))
    _assert_changed(info)


@READERS
def test_file_renamed_over_the_path_after_read_is_changed(
    reader: Reader, marked_path: str, safe_dir: Path, example_document: dict[str, Any]
) -> None:
    replacement = write_marked(safe_dir, example_document, "replacement.json")

    def swap() -> None:
        os.replace(replacement, marked_path)

    with pytest.raises(ManifestRefusal) as info:
        reader(marked_path, ReadHooks(after_read=swap))
    _assert_changed(info)


@READERS
def test_file_removed_after_read_is_changed(reader: Reader, marked_path: str) -> None:
    with pytest.raises(ManifestRefusal) as info:
        reader(marked_path, ReadHooks(after_read=lambda: os.unlink(marked_path)))
    _assert_changed(info)


@READERS
def test_parent_replaced_by_symlink_to_identical_copy_is_changed(
    reader: Reader, safe_dir: Path, example_document: dict[str, Any]
) -> None:
    parent = safe_dir / "p"
    parent.mkdir(mode=0o700)
    path = write_marked(parent, example_document)
    twin = safe_dir / "twin"
    twin.mkdir(mode=0o700)
    write_marked(twin, example_document)
    assert (twin / "manifest.json").read_bytes() == path.read_bytes()

    def swap_parent() -> None:
        os.rename(parent, safe_dir / "p-moved")
        os.symlink(twin, parent, target_is_directory=True)

    with pytest.raises(ManifestRefusal) as info:
        reader(str(path), ReadHooks(after_read=swap_parent))
    _assert_changed(info)


@READERS
def test_parent_replaced_by_symlink_to_itself_is_changed(
    reader: Reader, safe_dir: Path, example_document: dict[str, Any]
) -> None:
    """Same inode, same bytes -- but a symlink now sits on the path, so the read is refused."""
    parent = safe_dir / "p"
    parent.mkdir(mode=0o700)
    path = write_marked(parent, example_document)

    def swap_parent() -> None:
        os.rename(parent, safe_dir / "p-moved")
        os.symlink(safe_dir / "p-moved", parent, target_is_directory=True)

    with pytest.raises(ManifestRefusal) as info:
        reader(str(path), ReadHooks(after_read=swap_parent))
    _assert_changed(info)


async def test_invalid_cap_setting_is_config_invalid(marked_path: str) -> None:
    """A bad cap setting is a refusal envelope (CONFIG_INVALID at the manifest gate), not an exception."""
    env = await TrainingService({"ITO_TRAINING_MANIFEST_MAX_BYTES": "lots"}).digest_manifest(marked_path)
    assert env.ok is False
    assert env.error is not None
    assert env.error.code.value == "CONFIG_INVALID"
    assert env.error.gate is not None
    assert env.error.gate.value == "manifest"
    assert env.live_api_contacted is False
