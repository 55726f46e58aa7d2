"""Every transition and read: a verb names its keys, arguments and reply decoding, and runs
on either connector. No sockets, no clocks of their own."""
