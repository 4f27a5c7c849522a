-- 0001: indexes that serve the lease query, the sweeps and the dedup rule,
-- and the chat-wide "not before" that a Telegram 429 sets.

-- The claim walks pending tasks in (run_after, id) order: a plain index search.
CREATE INDEX tasks_pending_order ON tasks (run_after, id) WHERE state = 'pending';

-- "Does this chat already hold a live lease?" and the expired-lease repair.
CREATE INDEX tasks_running_chat ON tasks (chat_id, lease_expires) WHERE state = 'running';
CREATE INDEX tasks_running_expiry ON tasks (lease_expires) WHERE state = 'running';

-- Operators list and purge dead letters; stats count by state.
CREATE INDEX tasks_state_updated ON tasks (state, updated_at);

-- A dedup key names at most one task that is still pending or running.
CREATE UNIQUE INDEX tasks_dedup_live ON tasks (dedup_key)
    WHERE dedup_key IS NOT NULL AND state IN ('pending', 'running');

-- Chat-wide "not before" (Telegram's retry_after), one row per held chat.
CREATE TABLE chat_holds (
    chat_id    INTEGER PRIMARY KEY,
    not_before REAL NOT NULL
);

-- The TTL sweep of the link cache.
CREATE INDEX link_cache_created ON link_cache (created_at);
