"""Improvable parts of seed. They run in the module host, a child process of the kernel."""
