INSERT INTO corral_schema_version (version, applied_at) VALUES (?, ?);
