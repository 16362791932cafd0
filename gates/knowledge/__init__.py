"""The API tables: what starts threads, processes and tasks, what makes a network call, and where."""
