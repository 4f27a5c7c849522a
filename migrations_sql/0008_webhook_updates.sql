-- 0008: the webhook updates already answered 200 (issue 20, item 6).
--
-- Telegram sends an update again whenever it got no 2xx: after a 500, a crash, or
-- an answer lost on its way (a proxy, Telegram's own timeout). An update whose work
-- is queued is marked here before its 200, and a redelivery of a marked update is
-- answered 200 without running its handlers again, even once its task is done (the
-- tasks' dedup key spans only tasks still queued). Long polling needs none of it:
-- its offset is confirmed by the next getUpdates. The sweep drops rows after two
-- days (Telegram keeps an unconfirmed update for at most 24 hours), by the index.
CREATE TABLE webhook_updates (
    update_id    INTEGER PRIMARY KEY,
    answered_at  REAL    NOT NULL
);
CREATE INDEX webhook_updates_by_age ON webhook_updates (answered_at);
