"""Static analysis every rule shares: the scope model and name resolution, static values, project modules
and the calls between their functions and classes."""
