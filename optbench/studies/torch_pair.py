"""Do the installed torch and torchvision work together? torchvision's compiled ops are built for one torch release.

A mismatched pair can import and fail later, at the first call of one of
torchvision's ops, so the check calls one (`nms`, on one box) as well.
"""

from __future__ import annotations

from importlib import metadata

from ..errors import first_lines


class PairError(Exception):
    """The pair does not work together; the message is one line saying what to install."""


def check_pair() -> str:
    """One line naming the working pair, or PairError."""
    import torch

    fix = f"install the torchvision release built for torch {torch.__version__} (constraints.txt pins a tested pair)"
    try:
        import torchvision
        from torchvision.ops import nms

        nms(torch.zeros(1, 4), torch.ones(1), 0.5)
    except ModuleNotFoundError as error:
        if error.name != "torchvision":
            raise
        raise PairError(f"torchvision is not installed beside torch {torch.__version__}; {fix}") from None
    except Exception as error:  # whatever a mismatched build raises: missing operators, undefined symbols
        version = metadata.version("torchvision")  # its import may be what failed
        raise PairError(
            f"torch {torch.__version__} and torchvision {version} do not work together ({first_lines(error, 1)}); {fix}"
        ) from None
    return f"torch {torch.__version__} and torchvision {torchvision.__version__} work together"
