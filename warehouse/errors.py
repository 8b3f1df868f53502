"""Typed errors of the warehouse layer; the CLI and the UI turn them into one clear line."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ClusterNameClash",
    "DamagedFile",
    "EmptyWarehouse",
    "NotReadable",
    "NotWritable",
    "QueryParameterError",
    "SchemaMismatch",
    "StateFileTooNew",
    "UnknownTable",
    "WarehouseError",
]


class WarehouseError(Exception):
    """Base of every error the warehouse raises on purpose."""


class EmptyWarehouse(WarehouseError):
    """The lake has no data for what was asked."""

    def __init__(self, root: Path, what: str = "any table") -> None:
        self.root = root
        super().__init__(
            f"The lake at {str(root)!r} has no data for {what}; "
            "land data with `gpuledger simulate` or `gpuledger collect`, "
            "then build the marts with `gpuledger attribute`."
        )


class DamagedFile(WarehouseError):
    """A file of the lake is not readable (cut short, overwritten, empty): a table's Parquet
    file, or a state database or stored model under `_state/`."""

    def __init__(self, path: Path, reason: str, kind: str = "Parquet") -> None:
        self.path = path
        super().__init__(
            f"The lake file {str(path)!r} is not a readable {kind} file ({reason}); "
            "move it out of the lake (or restore it from a backup) and run again"
        )


class NotWritable(WarehouseError):
    """A folder or file of the lake (or another output) cannot be created or written."""

    def __init__(
        self,
        path: Path,
        exc: OSError,
        what: str = "create the folder",
        expected: str = "a folder this user can write to",
    ) -> None:
        self.path = path
        super().__init__(
            f"cannot {what} {str(path)!r} ({exc.strerror or exc}); expected {expected}"
        )


class NotReadable(WarehouseError):
    """A folder of the lake cannot be read by this user (another user's files, e.g. a node
    agent's): without this error its files would silently be missing from every query."""

    def __init__(self, path: Path, exc: OSError) -> None:
        self.path = path
        super().__init__(
            f"cannot read {str(path)!r} ({exc.strerror or exc}); every folder and file of the "
            "lake must be readable by this user (e.g. through the lake's group)"
        )


class ClusterNameClash(WarehouseError):
    """Two cluster names clean to one folder (`gpu farm` and `gpu_farm`): their rows would mix."""

    def __init__(self, cluster: str, known: str, folder: str) -> None:
        self.cluster, self.known, self.folder = cluster, known, folder
        super().__init__(
            f"cluster {cluster!r} would land in the folder cluster={folder} that holds cluster "
            f"{known!r} (both clean to {folder!r}); use one name for one cluster, or names "
            "that differ in letters, digits, '.', '_' or '-'"
        )


class StateFileTooNew(WarehouseError):
    """A state file whose schema version is newer than this gpuledger knows (a newer gpuledger
    wrote it): opened anyway, it would be misread or damaged."""

    def __init__(self, path: Path, found: int, known: int) -> None:
        self.path, self.found, self.known = path, found, known
        super().__init__(
            f"the state file {str(path)!r} has schema version {found}, newer than the {known} "
            "this gpuledger knows: a newer gpuledger wrote it; run that version (or newer) on "
            "this lake"
        )


class SchemaMismatch(WarehouseError):
    """A batch does not match the contract's schema for its table."""


class UnknownTable(WarehouseError):
    """A table name that the contract does not define."""


class QueryParameterError(WarehouseError):
    """A shipped query was called with the wrong parameters."""
