"""The one error type of the analyzer: a single line that names the reference file and, when known, the line."""

from __future__ import annotations

# What a person can do when kernelgen cannot derive the kernel math itself.
HAND_WRITTEN_PROFILE_HINT = (
    "or write the math fragments into a profile by hand (start from the profile of a built-in of its kind: "
    "python -m tools.kernelgen references lists them, element-wise, row and loss; "
    "python -m tools.kernelgen analyze BUILTIN -o profile.yaml) and run: "
    "python -m tools.kernelgen new NAME --profile profile.yaml"
)


class AnalyzeError(ValueError):
    """A reference kernelgen cannot analyze; the message is one line: ``where: what (what to do)``."""

    def __init__(self, message: str, *, origin: str = "", line: int | None = None):
        self.origin = origin
        self.line = line
        where = origin if line is None else f"{origin}:{line}"
        flat = " ".join(str(message).split())
        super().__init__(f"{where}: {flat}" if where else flat)
