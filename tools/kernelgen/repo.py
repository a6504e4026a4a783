"""Locate and check a Liger-Kernel checkout (this one, or any other given with ``--repo``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.layout import OPS_UTILS
from tools.kernelgen.layout import REGISTRATION_FILES

REQUIRED_FILES = (*REGISTRATION_FILES, OPS_UTILS)
REQUIRED_DIRS = ("test", "benchmark/scripts")


class RepoError(ValueError):
    """The path is not a Liger checkout kernelgen can write into."""


@dataclass(frozen=True)
class LigerRepo:
    root: Path

    @classmethod
    def open(cls, path: str | Path | None) -> LigerRepo:
        root = Path(path).resolve() if path else default_repo_root()
        if not root.is_dir():
            raise RepoError(f"{root}: not a directory")
        for relative in REQUIRED_FILES:
            if not (root / relative).is_file():
                raise RepoError(f"{root} is not a Liger-Kernel checkout: {relative} is missing")
        for relative in REQUIRED_DIRS:
            if not (root / relative).is_dir():
                raise RepoError(f"{root} is not a Liger-Kernel checkout: directory {relative}/ is missing")
        return cls(root)

    def read(self, relative: str) -> str:
        # newline="" keeps CRLF endings as they are, so untouched lines stay byte-identical.
        with open(self.root / relative, encoding="utf-8", newline="") as handle:
            return handle.read()

    def exists(self, relative: str) -> bool:
        return (self.root / relative).exists()

    def portable_origin(self, origin: str) -> str:
        """A reference's origin as generated files may quote it: a file inside the checkout by its repository-relative
        path, any other absolute path by the file's name alone (it would record one machine's layout); a relative
        path found nowhere in the checkout, ``builtin:NAME``, ``<stdin>`` or nothing stay as they are."""
        if not origin or origin.startswith("builtin:") or origin.startswith("<"):
            return origin
        given = Path(origin).expanduser()
        path = given.resolve()
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return path.name if given.is_absolute() else origin


def default_repo_root() -> Path:
    """The checkout kernelgen lives in (tools/kernelgen/ -> repository root)."""
    return Path(__file__).resolve().parents[2]
