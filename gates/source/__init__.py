"""From a path to a tree: discovery, decoding, parsing, lowering newer syntax, and the prefilter primitives."""
