-- 0006: sends that may have reached the chat, counted on their task (issue 20, item 7).
--
-- A call to Telegram that timed out (or lost its connection after the request
-- went out) may have been carried out all the same; the task is retried, and
-- that retry may repeat a message. The worker counts each such send here, so
-- `xbot queue show` and the soak can tell an explained duplicate from a bug.
-- A refused connection or a 502 is never counted: nothing reached the chat.
ALTER TABLE tasks ADD COLUMN ambiguous_sends INTEGER NOT NULL DEFAULT 0;
