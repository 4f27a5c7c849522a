-- 0005: a lost lease is not a failed attempt.
--
-- Until now every lease counted an attempt, and a lease handed back at
-- startup (a process death) or repaired after it expired dead-lettered the
-- task once attempts >= max_attempts: a crash loop killed innocent tasks. A
-- lost lease now gives its attempt back and is counted here instead, against
-- a larger budget (the rule: xbot.queue.judge_lost_lease).
--
-- lost_leases: leases lost in a row without progress (reset by progress).
-- progressed:  1 once the task recorded progress (an album sent) under its
--              current lease; the claim resets it to 0.
ALTER TABLE tasks ADD COLUMN lost_leases INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN progressed INTEGER NOT NULL DEFAULT 0;
