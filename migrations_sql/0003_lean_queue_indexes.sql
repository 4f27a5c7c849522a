-- 0003: fewer index pages written per lease+done.
--
-- Every index on tasks that a state change touches is one more page in the
-- WAL at each commit (a page is 4 KB; a lease+done wrote ~10 of them).
--
-- tasks_pending_order served the claim before chat lanes (0002); the claim
-- walks chat_lanes_order now, and the oldest pending run_after is the oldest
-- lane head. Nothing reads it any more.
DROP INDEX tasks_pending_order;

-- tasks_state_updated covered every row, and updated_at changes on every
-- write: a lease moved the task's entry twice (pending -> running -> done).
-- Only finished rows need updated_at: prune_done walks the done ones, the
-- dead list and purge_dead the dead ones; a row enters one of them once.
-- Each state is counted on its own partial index (tasks_chat_pending,
-- tasks_running_chat, these two). Two indexes rather than one over
-- state IN ('done', 'dead'): SQLite uses a partial index only when the query
-- repeats its condition, and "state = 'dead'" does not repeat an IN list.
DROP INDEX tasks_state_updated;
CREATE INDEX tasks_done_updated ON tasks (updated_at) WHERE state = 'done';
CREATE INDEX tasks_dead_updated ON tasks (updated_at) WHERE state = 'dead';

-- tasks_running_expiry served only the expired-lease repair, which runs at
-- every lease. A running row is a live lease, one per busy worker, so the
-- repair walks tasks_running_chat (all of them, a handful) instead, and a
-- lease and its mark_done write one index page fewer.
DROP INDEX tasks_running_expiry;
