"""The on-start script of CostGuard's notebook lifecycle configuration, built from files.

The CDK stack puts :func:`on_start_script` (base64) in the
``AWS::SageMaker::NotebookInstanceLifecycleConfig`` it creates, and the tests run the
very same text, so what is deployed is what was tested.
"""

from __future__ import annotations

import base64
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLACEHOLDER = "__HEARTBEAT_PY__"
DELIMITER = "COSTGUARD_HEARTBEAT_PY"
#: SageMaker's limit on a lifecycle hook's ``Content`` (the script, base64-encoded).
MAX_CONTENT = 16384


def on_start_script() -> str:
    """The on-start shell script, with the heartbeat module inlined."""
    template = (HERE / "on_start.sh").read_text(encoding="utf-8")
    module = (HERE / "heartbeat.py").read_text(encoding="utf-8").rstrip("\n")
    if DELIMITER in module or template.count(PLACEHOLDER) != 1:
        raise ValueError("the heartbeat module cannot be inlined in the on-start script")
    return template.replace(PLACEHOLDER, module)


def on_start_content() -> str:
    """Base64 of the script, as SageMaker takes it; refuses one SageMaker would refuse."""
    content = base64.b64encode(on_start_script().encode("utf-8")).decode("ascii")
    if len(content) > MAX_CONTENT:
        raise ValueError(
            f"the on-start script is {len(content)} base64 characters; SageMaker takes {MAX_CONTENT}"
        )
    return content
