SELECT COALESCE(MAX(version), 0) FROM corral_schema_version;
