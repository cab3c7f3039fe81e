"""Trust for the course notebooks as shipped, so that a learner's JupyterLab draws their saved widgets on opening.

JupyterLab draws an output that is not "safe" (a widget view; HTML is shown sanitised) only in a trusted notebook:
one whose signature, an HMAC of its whole content with the account's secret, is in the account's signature store
(``nbformat.sign.NotebookNotary``: ``notebook_secret`` and ``nbsignatures.db`` in the Jupyter data folder, where
``jupyter trust`` writes and where JupyterLab signs a notebook its user saves). Elsewhere it shows each saved
widget's fallback (``quizzes.saved_view``).

Trust is only about showing saved output. ``sign`` signs a notebook only when its bytes are those of the course's
own notebook of that name, into the store of the account that will open it (the caller's: run it as that
account). A notebook a learner changed has another signature and stays untrusted, and nothing here writes to an
instructor's store: grading never shows a learner's outputs to the instructor (docs/class-mode.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from labs import nboutputs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trusted:
    """What ``sign`` did: the notebooks signed, those left as they were (not the course's), and the store."""

    signed: tuple[Path, ...]
    left: tuple[Path, ...]
    store: Path


def data_dir() -> Path:
    """This account's Jupyter data folder (``$JUPYTER_DATA_DIR``, else the platform's), where JupyterLab looks."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir())


def sign(folder: Path, store: Path | None = None, *, shipped: Path = nboutputs.COURSE) -> Trusted:
    """Sign every notebook in ``folder`` that is byte for byte the course's own (``shipped``) into the signature
    store in ``store`` (default: this account's Jupyter data folder)."""
    import nbformat
    from nbformat.sign import NotebookNotary

    target = store or data_dir()
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    own = {p.name: p.read_bytes() for p in nboutputs.notebooks(shipped)}
    signed, left = [], []
    with NotebookNotary(data_dir=str(target)) as notary:  # type: ignore[no-untyped-call]
        for path in nboutputs.notebooks(folder):
            body = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            if body is None or own.get(path.name) != body:
                left.append(path)
                continue
            notary.sign(nbformat.reads(body.decode("utf-8"), as_version=4))  # type: ignore[no-untyped-call]
            signed.append(path)
    log.info("trusted %d course notebook(s) in %s; left %s", len(signed), target, [p.name for p in left])
    return Trusted(tuple(signed), tuple(left), target)


def is_trusted(path: Path, store: Path | None = None) -> bool:
    """Whether JupyterLab, reading ``store``, would draw ``path``'s saved outputs."""
    import nbformat
    from nbformat.sign import NotebookNotary

    target = store or data_dir()
    if not (target / "notebook_secret").is_file():  # no store yet: nothing is trusted (and none is made here)
        return False
    with NotebookNotary(data_dir=str(target)) as notary:  # type: ignore[no-untyped-call]
        nb = nbformat.read(str(path), as_version=4)  # type: ignore[no-untyped-call]
        return bool(notary.check_signature(nb))
