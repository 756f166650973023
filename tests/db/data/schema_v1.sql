-- The tuning database schema as fusetune wrote it at version 1 (frozen: the
-- migration test opens a file made from it).
CREATE TABLE targets(
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '{}',
  calibration TEXT NOT NULL DEFAULT '{}',
  created_at REAL NOT NULL);
CREATE TABLE workloads(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK(kind IN ('group', 'graph')),
  description TEXT NOT NULL DEFAULT '{}',
  created_at REAL NOT NULL);
CREATE TABLE jobs(
  id INTEGER PRIMARY KEY,
  spec TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('running', 'interrupted', 'done', 'failed')),
  progress TEXT NOT NULL DEFAULT '{}',
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL);
CREATE TABLE records(
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  plan TEXT NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('ok', 'failed', 'timeout', 'wrong')),
  seconds REAL,
  metrics TEXT NOT NULL DEFAULT '{}',
  error TEXT NOT NULL DEFAULT '',
  job_id INTEGER REFERENCES jobs(id),
  created_at REAL NOT NULL,
  fusetune_version TEXT NOT NULL,
  kernel_versions TEXT NOT NULL,
  digest INTEGER NOT NULL UNIQUE);
CREATE INDEX records_by_workload ON records(workload_id, target_id, status, seconds);
CREATE INDEX records_by_job ON records(job_id) WHERE job_id IS NOT NULL;
CREATE TABLE best(
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target_id INTEGER NOT NULL REFERENCES targets(id),
  record_id INTEGER NOT NULL REFERENCES records(id),
  seconds REAL NOT NULL,
  PRIMARY KEY(workload_id, target_id)) WITHOUT ROWID;
CREATE TABLE cost_models(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  target TEXT NOT NULL DEFAULT '',
  feature_version INTEGER NOT NULL,
  metrics TEXT NOT NULL DEFAULT '{}',
  model BLOB NOT NULL,
  active INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL);
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL);
