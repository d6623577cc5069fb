-- What each run's model calls cost by the operator's price table (issue 45.5): `goalfleet
-- history` and `GET /v1/history` sum it per day (`scheduler.store.history.queries.costs`).
ALTER TABLE runs ADD COLUMN cost DOUBLE PRECISION NOT NULL DEFAULT 0;
