"""Agent adapters: each turns a plan into one run spec and reads the run's output."""
