"""Storage: the one SQLite file (connections, schema, the task queue, chat
state, the link cache) and its online backup. `db` alone touches apsw's errors."""
