-- Every process relays, no leader: SKIP LOCKED lets two relays take disjoint rows, and a row is
-- deleted in the transaction that creates its jobs, so each event is relayed exactly once.
DELETE FROM {events} WHERE id IN (SELECT id FROM {events} ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
RETURNING id, topic, payload::text
