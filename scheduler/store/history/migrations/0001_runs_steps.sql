-- Run history: one row per ended run, one per step of its last attempt. Portable SQL: the same
-- file builds the PostgreSQL schema and the embedded SQLite one. Times are Unix seconds (the
-- fleet's own clock), durations milliseconds. No column holds an input's value, a secret, a
-- request body or a screen's texts: names, statuses, counts and times only
-- (`scheduler.store.history.rows`).
CREATE TABLE runs (
  run_id        TEXT NOT NULL PRIMARY KEY,
  attempt       INTEGER NOT NULL,
  batch         TEXT NOT NULL DEFAULT '',
  suite         TEXT NOT NULL DEFAULT '',
  flow          TEXT NOT NULL,
  goal          TEXT NOT NULL,
  device        TEXT NOT NULL DEFAULT '',
  device_class  TEXT NOT NULL DEFAULT '',
  platform      TEXT NOT NULL DEFAULT '',
  labels        TEXT NOT NULL DEFAULT '{}',
  status        TEXT NOT NULL,
  passed        INTEGER NOT NULL,
  counted       INTEGER NOT NULL,
  reason        TEXT NOT NULL DEFAULT '',
  error_code    TEXT NOT NULL DEFAULT '',
  submitted_at  DOUBLE PRECISION NOT NULL,
  started_at    DOUBLE PRECISION,
  finished_at   DOUBLE PRECISION NOT NULL,
  steps         INTEGER NOT NULL,
  duration_ms   DOUBLE PRECISION NOT NULL,
  snapshot_ms   DOUBLE PRECISION NOT NULL,
  decide_ms     DOUBLE PRECISION NOT NULL,
  action_ms     DOUBLE PRECISION NOT NULL,
  input_tokens  BIGINT NOT NULL,
  output_tokens BIGINT NOT NULL,
  decided_by    TEXT NOT NULL DEFAULT '{}',
  follows       INTEGER NOT NULL DEFAULT 0,
  flipped       INTEGER NOT NULL DEFAULT 0
);
-- `follows` / `flipped`: a counted run of the same flow on the same device ended before this
-- one / and its outcome differs (set by the write, from this index)
CREATE INDEX runs_by_flow ON runs (flow, device, finished_at);
-- pass and flaky rates per flow x device class, devices against their class, the prune: by end
-- time, with every column those questions read, so PostgreSQL answers from the index alone
CREATE INDEX runs_by_end ON runs (finished_at, counted, flow, device_class, device, passed, follows, flipped);

CREATE TABLE steps (
  run_id       TEXT NOT NULL,
  attempt      INTEGER NOT NULL,
  step         INTEGER NOT NULL,
  flow         TEXT NOT NULL,
  finished_at  DOUBLE PRECISION NOT NULL,
  screen       TEXT NOT NULL DEFAULT '',
  decision     TEXT NOT NULL DEFAULT '',
  outcome      TEXT NOT NULL,
  snapshot_ms  DOUBLE PRECISION NOT NULL,
  decide_ms    DOUBLE PRECISION NOT NULL,
  action_ms    DOUBLE PRECISION NOT NULL,
  decided_by   TEXT NOT NULL DEFAULT '',
  artifact     TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, attempt, step)
);
-- step p50/p95 per flow and phase over a window (and the prune): the run's end time and flow
-- are copied onto its steps so the question needs no join; the phases ride in the index so
-- PostgreSQL answers from it alone
CREATE INDEX steps_by_time ON steps (finished_at, flow, snapshot_ms, decide_ms, action_ms);

-- Step times per UTC day, flow and phase as one histogram each: `counts` is a JSON object
-- {bucket: steps}, bucket k holding times in (0.1 ms * r^(k-1), 0.1 ms * r^k], r = 2^(1/8)
-- (`scheduler.store.history.hist`). The p50 / p95 question reads one row per day, flow and
-- phase, not a million steps. Kept exactly in step with `steps` by the writes that change it
-- (the same transaction adds a run's new steps and takes away those of the attempt it
-- replaces) and by the prune (whole days).
CREATE TABLE step_hist (
  day     BIGINT NOT NULL,
  flow    TEXT NOT NULL,
  phase   TEXT NOT NULL,
  steps   BIGINT NOT NULL,
  counts  TEXT NOT NULL,
  PRIMARY KEY (day, flow, phase)
);
