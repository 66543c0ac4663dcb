"""The protected kernel: the loop, the guard, the measurements, the verifier, the record store."""
