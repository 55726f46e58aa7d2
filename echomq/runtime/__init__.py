"""The loops that run jobs: one queue's Consumer (claims, handler calls, settling, lease
checkpoints), the Metronome and Pump, what a handler sees, events and tracing."""
