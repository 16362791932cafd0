-- The job that holds a unique key: the one job with it whose state is among its unique_states.
SELECT id FROM corral_jobs WHERE unique_key = ? AND instr(unique_states, ',' || state || ',') > 0;
