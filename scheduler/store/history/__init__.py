"""Run history that outlives Redis: ended runs and their steps in a SQL database (PostgreSQL for
a fleet, SQLite embedded), reached through an outbox in Redis, and the questions asked of it.

- `store`: the `HistoryStore` seam and `SqlHistory`; `db`: the connection and migrations;
- `rows`: what is kept of a run (never a typed value or a secret);
- `outbox`: the outbox and `HistoryWriter`, which drains it;
- `queries`: pass and flaky rates, step percentiles, devices that stand out.
"""
