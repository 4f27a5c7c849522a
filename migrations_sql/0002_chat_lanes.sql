-- 0002: chat lanes, so the claim never walks the backlog of a busy chat.
--
-- Walking pending tasks in (run_after, id) order and skipping chats that hold
-- a live lease costs one row per skipped task: with every chat that has work
-- busy (a few chats with long backlogs, more workers than chats) each claim
-- walked the whole backlog and found nothing. A lane is one row per chat
-- with pending work, naming that chat's head (its first pending task by
-- (run_after, id)); the claim walks lanes, so it skips one row per busy or
-- held chat, whatever their backlogs. Triggers keep the lanes true for every
-- writer of tasks, not only the queue module.

-- A chat's pending tasks in its own order: finds the next head in one search.
CREATE INDEX tasks_chat_pending ON tasks (chat_id, run_after, id) WHERE state = 'pending';

CREATE TABLE chat_lanes (
    chat_id        INTEGER PRIMARY KEY,
    head_run_after REAL    NOT NULL,
    head_id        INTEGER NOT NULL
);

-- The claim walks lanes oldest head first.
CREATE INDEX chat_lanes_order ON chat_lanes (head_run_after, head_id);

-- A task that becomes pending (new, rescheduled, repaired, retried, moved)
-- becomes its chat's head if it comes first.
CREATE TRIGGER tasks_lane_insert AFTER INSERT ON tasks WHEN new.state = 'pending'
BEGIN
    INSERT INTO chat_lanes (chat_id, head_run_after, head_id)
    VALUES (new.chat_id, new.run_after, new.id)
    ON CONFLICT (chat_id) DO UPDATE
        SET head_run_after = excluded.head_run_after, head_id = excluded.head_id
        WHERE (excluded.head_run_after, excluded.head_id)
            < (chat_lanes.head_run_after, chat_lanes.head_id);
END;

CREATE TRIGGER tasks_lane_enter AFTER UPDATE OF state, run_after, chat_id ON tasks
WHEN new.state = 'pending'
BEGIN
    INSERT INTO chat_lanes (chat_id, head_run_after, head_id)
    VALUES (new.chat_id, new.run_after, new.id)
    ON CONFLICT (chat_id) DO UPDATE
        SET head_run_after = excluded.head_run_after, head_id = excluded.head_id
        WHERE (excluded.head_run_after, excluded.head_id)
            < (chat_lanes.head_run_after, chat_lanes.head_id);
END;

-- The head left (claimed, moved to another chat, run_after changed): the
-- next pending task of the chat is the new head, or the lane goes.
CREATE TRIGGER tasks_lane_leave AFTER UPDATE OF state, run_after, chat_id ON tasks
WHEN old.state = 'pending'
    AND old.id = (SELECT head_id FROM chat_lanes WHERE chat_id = old.chat_id)
BEGIN
    DELETE FROM chat_lanes WHERE chat_id = old.chat_id;
    INSERT INTO chat_lanes (chat_id, head_run_after, head_id)
    SELECT chat_id, run_after, id FROM tasks INDEXED BY tasks_chat_pending
    WHERE state = 'pending' AND chat_id = old.chat_id
    ORDER BY run_after, id LIMIT 1;
END;

CREATE TRIGGER tasks_lane_delete AFTER DELETE ON tasks
WHEN old.state = 'pending'
    AND old.id = (SELECT head_id FROM chat_lanes WHERE chat_id = old.chat_id)
BEGIN
    DELETE FROM chat_lanes WHERE chat_id = old.chat_id;
    INSERT INTO chat_lanes (chat_id, head_run_after, head_id)
    SELECT chat_id, run_after, id FROM tasks INDEXED BY tasks_chat_pending
    WHERE state = 'pending' AND chat_id = old.chat_id
    ORDER BY run_after, id LIMIT 1;
END;

-- Lanes for the pending work already there.
INSERT INTO chat_lanes (chat_id, head_run_after, head_id)
SELECT t.chat_id, t.run_after, t.id FROM tasks AS t
WHERE t.state = 'pending' AND t.id = (
    SELECT p.id FROM tasks AS p INDEXED BY tasks_chat_pending
    WHERE p.state = 'pending' AND p.chat_id = t.chat_id
    ORDER BY p.run_after, p.id LIMIT 1);
