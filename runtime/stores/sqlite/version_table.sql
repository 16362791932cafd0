-- Like PostgreSQL's <prefix>schema_version: one row per applied migration.
CREATE TABLE IF NOT EXISTS corral_schema_version (
    version INTEGER PRIMARY KEY,
    applied_at REAL NOT NULL
);
