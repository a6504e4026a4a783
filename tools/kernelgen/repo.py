"""Locate and check a Liger-Kernel checkout (this one, or any other given with ``--repo``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.kernelgen.layout import OPS_UTILS
from tools.kernelgen.layout import REGISTRATION_FILES

REQUIRED_FILES = (*REGISTRATION_FILES, OPS_UTILS)
REQUIRED_DIRS = ("test", "benchmark/scripts")
# kernelgen's own state in a checkout that is not a git repository (git-ignored in this repository).
STATE_FALLBACK = ".kernelgen-state"


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

    def state_dir(self) -> Path:
        """Where kernelgen keeps what belongs to this checkout but not to its commits (generation records, the
        write journal, the lock): inside the checkout's git directory, which no commit or pull request carries;
        ``.kernelgen-state/`` in a checkout without git. The folder is not created here."""
        git_dir = private_git_dir(self.root)
        return git_dir / "kernelgen" if git_dir else self.root / STATE_FALLBACK

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


def private_git_dir(root: Path) -> Path | None:
    """The git directory of the checkout at ``root`` (``.git/``, or where a worktree's ``.git`` file points), or
    None when ``root`` is no git checkout's top."""
    dot_git = Path(root) / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        first = dot_git.read_text(encoding="utf-8", errors="replace").partition("\n")[0]
        if first.startswith("gitdir:"):
            target = Path(first[len("gitdir:") :].strip())
            target = target if target.is_absolute() else (Path(root) / target)
            return target.resolve() if target.is_dir() else None
    return None


def default_repo_root() -> Path:
    """The checkout kernelgen lives in (tools/kernelgen/ -> repository root)."""
    return Path(__file__).resolve().parents[2]
