"""Sans-IO core: what a verb sends and how its reply decodes, the state table, key names,
ids, outcomes, errors, guards, time converters and the pure planners. Imports nothing above."""
