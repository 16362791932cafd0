-- A running attempt extends its own lease (only under its claim): its process still runs it.
UPDATE {jobs} SET lease_until = now() + %s * interval '1 second' WHERE id = %s AND claims = %s AND state = 'running'
