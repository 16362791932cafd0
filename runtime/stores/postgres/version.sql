SELECT COALESCE(MAX(version), 0) FROM {schema_version}
