-- 0007: where the bot's time line was anchored (xbot.clock, xbot.storage.time_line).
--
-- One row: the boot it was written in, the monotonic reading and the line's value
-- at that reading. A start in the same boot knows from it exactly where the line
-- is now (the monotonic clock is the boot's, shared by every process), however the
-- wall clock stepped meanwhile, and rebases what is stored onto the wall clock by
-- the difference. `seen` is the latest time on the line the bot is known to have
-- reached and `offset` how far the line was ahead of the wall clock then (both
-- written at each sweep and at each step noticed): a start in another boot puts
-- what is stored back onto the wall clock by `offset`, and one whose wall clock is
-- behind `seen` knows the clock went back.
CREATE TABLE time_line (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    boot_id TEXT    NOT NULL,
    mono    REAL    NOT NULL,
    line    REAL    NOT NULL,
    seen    REAL    NOT NULL,
    offset  REAL    NOT NULL
);
