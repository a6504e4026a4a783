"""The one error ``patch`` reports for bad input (a model type, a modeling file, a target it cannot write into)."""


class PatchError(ValueError):
    """Reported in one line; nothing is written."""
