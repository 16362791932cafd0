-- Key leases get the PostgreSQL store's columns: a nullable holder and busy_until (a free slot may
-- keep its row). SQLite cannot relax NOT NULL in place, so the table is rebuilt with its rows.
CREATE TABLE corral_key_leases_v2 (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    slot INTEGER NOT NULL,
    holder INTEGER,
    busy_until REAL,
    PRIMARY KEY (queue, key, slot)
);
INSERT INTO corral_key_leases_v2 (queue, key, slot, holder, busy_until)
    SELECT queue, key, slot, holder, until FROM corral_key_leases;
DROP TABLE corral_key_leases;
ALTER TABLE corral_key_leases_v2 RENAME TO corral_key_leases;
