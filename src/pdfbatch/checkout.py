"""The pdfbatch checkout a command runs from, and where a local stack keeps its state in it.

The tooling that starts, builds and deploys a local stack lives in the checkout's tools/ (not in the
wheel) and writes everything a stack needs at run time under ``<checkout>/.localstack/<port>/``. The
installed CLI reads some of it (the API key `stack up` stored) and finds that tooling through here.
Standard library only: the tooling and test fixtures import it from any environment.
"""

from __future__ import annotations

from pathlib import Path

STATE_DIR = ".localstack"  # under the checkout, git-ignored: one folder per LocalStack port


def find_checkout(start: Path | None = None) -> Path | None:
    """The nearest folder above ``start`` (default: cwd) holding infra/localstack, else None.

    The installed package's own checkout (an editable install) only when ``start`` is in none: tooling
    acts on the checkout it is run from, even when its venv's package was installed from another clone.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if _is_checkout(folder):
            return folder
    package_checkout = Path(__file__).resolve().parents[2]  # src/pdfbatch/checkout.py in a checkout
    return package_checkout if _is_checkout(package_checkout) else None


def stack_home(root: Path, port: int) -> Path:
    """Everything the local stack on ``port`` writes at run time (its function processes carry it too)."""
    return root / STATE_DIR / str(port)


def _is_checkout(folder: Path) -> bool:
    return (folder / "infra" / "localstack" / "requirements.txt").is_file()
