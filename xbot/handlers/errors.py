"""The one error handler: what a handler raised becomes a log line, never a traceback
to a user."""

from __future__ import annotations

import logging

from telegram import Update

from xbot.logs import kv
from xbot.receiving.intake import note_failure
from xbot.services import XContext

log = logging.getLogger(__name__)


async def on_error(update: object, context: XContext) -> None:
    """The one error handler: a log line, never a traceback to a user."""
    err = context.error
    chat = update.effective_chat.id if isinstance(update, Update) and update.effective_chat else ""
    # An update whose work could not be stored comes again (a webhook's 500, or polling
    # that does not confirm it): one line, no traceback; the database's state is no bug.
    if note_failure(err):
        log.warning("update not stored, it comes again %s", kv(chat=chat, error=err))
        return
    log.error("handler failed %s", kv(chat=chat, error=type(err).__name__), exc_info=err)
