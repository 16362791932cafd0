INSERT INTO {schema_version} (version) VALUES (%s)
