-- Free lease rows of keys nobody used for a day; a key in use keeps its rows.
DELETE FROM {key_leases} WHERE busy_until IS NULL OR busy_until < now() - interval '1 day'
