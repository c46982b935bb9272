"""The candidate kit: its public test vectors (computed by the references) and its build (`grade kit build`)."""
