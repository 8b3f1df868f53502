"""Where each table's files live: `<root>/<table>/cluster=<c>/date=<YYYY-MM-DD>/<batch>.parquet`.

Marts with no date column are partitioned by cluster only. State that is updated in place lives
under `<root>/_state/`, never beside the Parquet files.

Permissions: one lake is written by several users of one group (node agents as root with
Group=gpuledger, the service as gpuledger), and nothing in it is for other users. Folders are
DIR_MODE, group-writable with the setgid bit, so everything made in them takes the lake root's
group, whoever makes it, and any member may create, rename over and remove files there.
Files are replaced whole by a rename (which needs write on the folder only), so FILE_MODE is
group-readable; files updated in place (SQLite state, lock files) are SHARED_FILE_MODE,
group-writable. Modes are set on what this process creates only: chmod on another user's file
would fail, and its mode is already the lake's.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote

from warehouse.errors import ClusterNameClash, DamagedFile, NotReadable, NotWritable

__all__ = [
    "MAX_CLUSTER_NAME",
    "DIR_MODE",
    "FILE_MODE",
    "PRIVATE_DIR_MODE",
    "SHARED_FILE_MODE",
    "batch_path",
    "claim_cluster_folder",
    "create_temp",
    "ensure_dir",
    "files_fingerprint",
    "files_listing",
    "folder_files",
    "folder_cluster",
    "listing_fingerprint",
    "open_private_db",
    "open_shared_file",
    "open_state_db",
    "partition_dir",
    "partition_files",
    "partition_key",
    "resolve_root",
    "safe_name",
    "state_dir",
    "table_dir",
    "table_files",
]

DIR_MODE = 0o2770  # rwxrws---: the group's members all write; new entries take its group
FILE_MODE = 0o640  # rw-r-----: replaced by rename, never rewritten in place
SHARED_FILE_MODE = 0o660  # rw-rw----: updated in place by whichever member runs (SQLite, locks)
PRIVATE_DIR_MODE = 0o750  # rwxr-x---: written by its owner only, readable by the group
DEFAULT_ROOT = Path("lake")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def resolve_root(lake: str | os.PathLike[str] | None) -> Path:
    """Return the lake root: the given path, else the default `./lake` (env is read by the CLI),
    made absolute. The build state records the lake's files by path: spelled `lake` by one
    command and `/srv/lake` by another (the service's configuration), each rebuilt every day
    the other had built, and `prune` kept days "not built from their samples as they are now"."""
    return Path(os.path.abspath(lake if lake else DEFAULT_ROOT))


# The longest cluster name gpuledger takes (a command's --cluster, a [[sources]] entry's): the
# name goes into file names in the lake (its folder, `<name>.name`, batch files
# `k8s-<name>-gpus-…-<digest>.parquet` and their temporary `.<file>.<random>.tmp`, about 90
# characters more), and a file name has at most 255 bytes (a 300-character name ended in an
# OSError "File name too long" half-way through a landing). safe_name keeps its length.
MAX_CLUSTER_NAME = 100


def safe_name(value: str) -> str:
    """Make `value` safe as one path component (cluster names and batch ids come from users)."""
    cleaned = _SAFE.sub("_", value).strip("._")
    return cleaned or "_"


CLUSTERS_DIR = "clusters"  # under _state: <folder>.name holds the raw name of each cluster folder


def claim_cluster_folder(root: Path, cluster: str) -> str:
    """The folder name (`safe_name`) of `cluster`, recorded in the lake as that cluster's.

    The first name landed in a folder claims it: `_state/clusters/<folder>.name` holds it
    (created whole, by a hard link, so two writers racing see one winner). A later, different
    name that cleans to the same folder (`gpu farm` after `gpu_farm`) raises ClusterNameClash
    instead of mixing two clusters' rows in one folder.
    """
    folder = safe_name(cluster)
    record = ensure_dir(state_dir(root) / CLUSTERS_DIR) / f"{folder}.name"
    for _ in range(3):
        try:
            known = record.read_text(encoding="utf-8")
        except FileNotFoundError:
            fd, tmp = create_temp(record)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(cluster)
                try:
                    os.link(tmp, record)
                except FileExistsError:
                    continue  # another writer claimed it meanwhile: compare with theirs
                return folder
            finally:
                tmp.unlink(missing_ok=True)
        if known == cluster:
            return folder
        raise ClusterNameClash(cluster, known, folder)
    raise AssertionError("unreachable: the record exists after a failed link")


def table_dir(root: Path, table: str) -> Path:
    return root / table


def partition_dir(root: Path, table: str, cluster: str, date: dt.date | None) -> Path:
    """Return the partition folder of `table` for `cluster` (and `date` where it has one)."""
    folder = table_dir(root, table) / f"cluster={safe_name(cluster)}"
    return folder / f"date={date.isoformat()}" if date is not None else folder


def partition_key(path: Path) -> tuple[str, dt.date] | None:
    """The (cluster folder, date) of a file in the layout, from its `cluster=`/`date=` folders;
    None for a file outside it (no such folders, or a date that does not parse)."""
    found: dict[str, str] = {}
    for part in path.parts:
        key, sep, value = part.partition("=")
        if sep and key in ("cluster", "date"):
            found.setdefault(key, value)
    if "cluster" not in found or "date" not in found:
        return None
    try:
        return found["cluster"], dt.date.fromisoformat(found["date"])
    except ValueError:
        return None


def day_files(root: Path, table: str) -> dict[tuple[str, dt.date], list[Path]]:
    """`table`'s files by (cluster folder, date) partition; files outside the layout left out."""
    days: dict[tuple[str, dt.date], list[Path]] = {}
    for path in table_files(root, table):
        key = partition_key(path)
        if key is not None:
            days.setdefault(key, []).append(path)
    return days


def folder_cluster(path: Path) -> str | None:
    """The cluster a file's nearest `cluster=` folder names, percent-decoded as hive writers
    (Spark's partitionBy, pyarrow) encode it ('a b' in cluster=a%20b); None outside the layout
    or where it does not decode to UTF-8. `safe_name` leaves no `%`, so the lake's own folders
    decode to themselves. The same rule as sql/views/lake_files.sql, for files read by pyarrow.
    """
    for part in reversed(path.parent.parts):
        key, sep, value = part.partition("=")
        if sep and key == "cluster":
            try:
                return unquote(value, errors="strict") or None
            except UnicodeDecodeError:
                return None
    return None


def batch_path(partition: Path, batch_id: str) -> Path:
    return partition / f"{safe_name(batch_id)}.parquet"


def table_files(root: Path, table: str) -> list[Path]:
    """Every committed Parquet file of `table` (temporary files start with a dot: skipped)."""
    folder = table_dir(root, table)
    try:
        if not folder.is_dir():
            return []
    except PermissionError as exc:  # the lake itself is not this user's to enter
        raise NotReadable(folder, exc) from None

    def unreadable(exc: OSError) -> None:  # a folder removed meanwhile is simply gone
        if isinstance(exc, PermissionError):
            raise NotReadable(Path(exc.filename or folder), exc)

    return folder_files(folder, unreadable)


def folder_files(folder: Path, onerror: Callable[[OSError], None] = lambda _: None) -> list[Path]:
    """Every committed Parquet file under `folder` (temporary files start with a dot: skipped),
    sorted; `onerror` is called with the error of a folder that cannot be listed."""
    # joined and sorted as text, in Path order (by part): a lake of long history has thousands
    # of files, and building a Path per name and comparing Paths cost more than the listing
    found = [
        path
        for path in _walk_files(str(folder), onerror)
        if path.endswith(".parquet") and not os.path.basename(path).startswith(".")
    ]
    found.sort(key=_path_parts)
    return [Path(path) for path in found]


def partition_files(root: Path, table: str, key: tuple[str, dt.date]) -> list[Path]:
    """The committed files of `table`'s day partition `key` (cluster folder, date), as
    `table_files` lists them, from that partition's folder alone."""
    folder = table_dir(root, table) / f"cluster={key[0]}" / f"date={key[1].isoformat()}"
    return [p for p in folder_files(folder) if partition_key(p) == key]


def _walk_files(folder: str, onerror: Callable[[OSError], None]) -> Iterator[str]:
    """The files under `folder`, as `os.walk` finds them (symbolic links to folders are not
    entered), without its extra `lstat` of every folder: the file type the listing returns
    says which entries are links."""
    pending = [folder]
    while pending:
        top = pending.pop()
        try:
            entries = os.scandir(top)
        except OSError as exc:
            onerror(exc)
            continue
        with entries:
            for entry in entries:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                if not is_dir:
                    yield entry.path
                elif not entry.is_symlink():
                    pending.append(entry.path)


def _path_parts(path: str) -> list[str]:
    return path.split(os.sep)


def files_fingerprint(paths: Iterable[Path], salt: str = "") -> str:
    """A digest of files' names, sizes and modification times (and `salt`): it changes when
    any of them is added, removed or rewritten, without reading their contents."""
    return listing_fingerprint(files_listing(paths), salt)


def files_listing(paths: Iterable[Path]) -> str:
    """The names, sizes and modification times of files, a line each: what `files_fingerprint`
    digests, kept to digest later with a salt not known now (warehouse/compaction_log.py)."""
    lines = []
    for path in paths:
        stat = path.stat()
        lines.append(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n")
    return "".join(lines)


def listing_fingerprint(listing: str, salt: str = "") -> str:
    """`files_fingerprint` of the files a `files_listing` listed, as they were then."""
    return hashlib.sha1((salt + listing).encode()).hexdigest()


def state_dir(root: Path) -> Path:
    """Return `<root>/_state`, created with DIR_MODE (the lake's group only)."""
    return ensure_dir(root / "_state")


def open_state_db(
    root: Path, filename: str, timeout_s: float = 30.0, *, autocommit: bool = False
) -> sqlite3.Connection:
    """Open `<root>/_state/<filename>` (SQLite), made SHARED_FILE_MODE whatever the umask."""
    return open_private_db(state_dir(root) / filename, timeout_s, autocommit=autocommit)


def open_private_db(
    path: Path, timeout_s: float = 30.0, *, autocommit: bool = False
) -> sqlite3.Connection:
    """Open the SQLite file `path`, created with SHARED_FILE_MODE (the group may write it, other
    users nothing) whatever the umask.

    SQLite gives its journal and WAL files the database file's permissions (and, run as root,
    its owner): shared and private too.
    """
    try:
        os.close(open_shared_file(path, os.O_RDWR))
    except OSError as exc:  # e.g. a state file of another user, from before the lake was shared
        raise NotWritable(
            path,
            exc,
            "open the state file",
            "a file the lake's group may write: as its owner, `chmod 660` it and `chgrp` it to "
            "the lake's group (an earlier version made some state files owner-only)",
        ) from exc
    if autocommit:  # the caller issues BEGIN/COMMIT itself
        con = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
    else:
        con = sqlite3.connect(path, timeout=timeout_s)
    try:
        con.execute("PRAGMA schema_version").fetchone()  # reads the header: is it SQLite?
    except sqlite3.DatabaseError as exc:
        con.close()
        if isinstance(exc, sqlite3.OperationalError):  # locked, busy: not damage
            raise
        raise DamagedFile(path, str(exc), "SQLite state") from exc
    return con


def open_shared_file(path: Path, flags: int) -> int:
    """Open `path` with `flags` (O_RDWR, O_WRONLY, O_APPEND…), creating it with SHARED_FILE_MODE
    whatever the umask if it is missing; return the descriptor. Symbolic links are refused.

    An existing file (another member of the group may have made it) is opened as it is.
    """
    flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, SHARED_FILE_MODE)
    except FileExistsError:
        return os.open(path, flags)
    os.fchmod(fd, SHARED_FILE_MODE)
    return fd


@contextmanager
def table_lock(root: Path, table: str) -> Iterator[None]:
    """Hold `<root>/_state/locks/<table>.lock` exclusively while the body runs, so landing a
    batch of `table` (its write and the eviction of its older rows) and compacting one of its
    partitions take turns: across threads of one process (each call opens the file anew) and
    across processes on the lake."""
    path = state_dir(root) / "locks" / f"{safe_name(table)}.lock"
    try:
        ensure_dir(path.parent)
        fd = open_shared_file(path, os.O_RDWR)
    except OSError as exc:
        raise NotWritable(path, exc, "lock") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def create_temp(target: Path) -> tuple[int, Path]:
    """Create a new temporary file beside `target` (hidden: `.<name>.<random>.tmp`), FILE_MODE
    whatever the umask; return its descriptor (open for writing) and path.

    Its folder is writable by the whole group, so the name is random and the file is made with
    O_EXCL and O_NOFOLLOW: never a file or link another member left there.
    """
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd, tmp


def replace_rederivable(path: Path, write: Callable[[BinaryIO], object]) -> bool:
    """Replace the state file `path` with what `write` writes, through a temporary file and a
    rename, for a file the lake can derive again (a cache): no fsync, since a torn or missing
    one is derived again. Returns False, leaving the old file, where it cannot be written (a
    reader's lake, no room): the next caller derives it again.
    """
    try:
        ensure_dir(path.parent)
        fd, tmp = create_temp(path)
    except (OSError, NotWritable):
        return False
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
    finally:
        tmp.unlink(missing_ok=True)  # renamed into place already, unless the write failed


def ensure_dir(path: Path, mode: int = DIR_MODE) -> Path:
    """Create `path` and its parents with `mode`: DIR_MODE (the group's, setgid; nothing for
    others), or PRIVATE_DIR_MODE for a folder of one user (a node agent's spool).

    Raises NotWritable naming the folder when it cannot be made (a file in the way, no
    permission, a read-only file system).
    """
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue  # made meanwhile by another process (maybe another user's): its mode stays
        except OSError as exc:
            raise NotWritable(folder, exc) from exc
        try:
            os.chmod(folder, mode)
        except OSError as exc:
            raise NotWritable(folder, exc) from exc
    return path
