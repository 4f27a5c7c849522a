-- 0004: when a chat's head is claimed, the lane moves to the next head in
-- place instead of being deleted and inserted again.
--
-- The claim fires tasks_lane_leave every time. Its DELETE + INSERT took the
-- lane's row out of chat_lanes and put it back; an UPDATE rewrites it in
-- place (its chat_lanes_order entry moves either way): the claim costs
-- ~1.5 us less (~14 -> ~12.5 us). The lane goes only when the task left the chat's pending
-- set (claimed, finished, moved) and no other pending task is left; a head
-- that stays pending and first (its run_after rewritten) keeps its lane
-- whichever of the two update triggers SQLite fires first.
DROP TRIGGER tasks_lane_leave;

CREATE TRIGGER tasks_lane_leave AFTER UPDATE OF state, run_after, chat_id ON tasks
WHEN old.state = 'pending'
    AND old.id = (SELECT head_id FROM chat_lanes WHERE chat_id = old.chat_id)
BEGIN
    UPDATE chat_lanes SET (head_run_after, head_id) = (
        SELECT run_after, id FROM tasks INDEXED BY tasks_chat_pending
        WHERE state = 'pending' AND chat_id = old.chat_id
        ORDER BY run_after, id LIMIT 1)
    WHERE chat_id = old.chat_id AND EXISTS (
        SELECT 1 FROM tasks INDEXED BY tasks_chat_pending
        WHERE state = 'pending' AND chat_id = old.chat_id);
    DELETE FROM chat_lanes WHERE chat_id = old.chat_id AND head_id = old.id
        AND (new.state <> 'pending' OR new.chat_id <> old.chat_id);
END;
