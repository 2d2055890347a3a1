"""The one model-zoo folder a test session's read-only zoo users share.

``model_zoo.build_pair`` reuses a model its manifest says is already built, so tests that only read a pair share one
folder and the session writes each pair once: a fresh folder per test wrote about 155 MB of weights (and spent a
second or more generating them) for every proposer a test built, some 6 GB per run of the suite. Tests about
building itself (tests/test_model_zoo*.py) keep their own folders.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def shared_zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.getbasetemp() / "zoo-shared"
    folder.mkdir(exist_ok=True)
    return folder
