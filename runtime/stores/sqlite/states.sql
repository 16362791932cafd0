-- {marks} becomes one '?' per id of the chunk: the ids stay bound values.
SELECT id, queue, state, result, last_error FROM corral_jobs WHERE id IN ({marks});
