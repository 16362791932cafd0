-- A running attempt extends its own lease (only under its claim): its process still runs it.
UPDATE corral_jobs SET lease_until = ? WHERE id = ? AND claims = ? AND state = 'running';
