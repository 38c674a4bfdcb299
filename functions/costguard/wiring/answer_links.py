"""The e-mailed answer links of a guard's warnings (with ``answers`` on): the link secret
(``COSTGUARD_LINK_SECRET``, read through the one Secrets Manager adapter, cached per warm
container) and the answer endpoint's address (``COSTGUARD_ANSWER_URL``).

With either missing, or the secret unreadable when a warning goes out, the warning carries
no links, as before answers existed: never a broken link, and never a warning lost to a
link.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from costguard.adapters.secrets import secret_bytes
from costguard.domain.answer_links import answer_base, email_answers
from costguard.env import Env

if TYPE_CHECKING:
    from costguard.adapters.sns import AnswerLinks
    from costguard.domain.alerts import Alert
    from costguard.domain.answer_links import EmailAnswers


def new_nonce() -> str:
    """A link's single-use id: 128 random bits."""
    return secrets.token_urlsafe(16)


def email_answer_links(
    environ: Mapping[str, str],
    *,
    read_secret: Callable[[str], bytes] = secret_bytes,
    nonce: Callable[[], str] = new_nonce,
    on_error: Callable[[str], None] | None = None,
) -> AnswerLinks | None:
    """What signs a warning's links, or None when the Lambda has no link secret or no valid
    answer address. ``on_error`` hears why a warning went out without links (never the
    secret)."""
    secret_name = environ.get(Env.LINK_SECRET, "").strip()
    base = environ.get(Env.ANSWER_URL, "").strip()
    if not secret_name or answer_base(base) is None:
        return None

    def links(alert: Alert) -> EmailAnswers | None:
        try:
            secret = read_secret(secret_name)
        except Exception as exc:  # the warning goes out all the same, without links
            if on_error is not None:
                on_error(f"the link secret could not be read ({type(exc).__name__})")
            return None
        return email_answers(alert, secret, base, nonce)

    return links
