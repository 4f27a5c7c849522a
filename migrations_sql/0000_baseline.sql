-- Version 0: the baseline schema. FROZEN: never edited, never gains a column.
-- Changes go into a new numbered file after the last one.

CREATE TABLE tasks (
    id            INTEGER PRIMARY KEY,
    kind          TEXT    NOT NULL,
    chat_id       INTEGER NOT NULL,
    payload       TEXT    NOT NULL,
    state         TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'running', 'done', 'dead')),
    dedup_key     TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL DEFAULT 5,
    run_after     REAL    NOT NULL,
    lease_token   TEXT,
    lease_expires REAL,
    last_error    TEXT,
    created_at    REAL    NOT NULL,
    updated_at    REAL    NOT NULL
);

CREATE TABLE chat_state (
    chat_id    INTEGER PRIMARY KEY,
    settings   TEXT NOT NULL DEFAULT '{}',
    records    TEXT NOT NULL DEFAULT '{}',
    updated_at REAL NOT NULL
);

CREATE TABLE link_cache (
    key        TEXT PRIMARY KEY,
    entry      TEXT NOT NULL,
    created_at REAL NOT NULL
);
