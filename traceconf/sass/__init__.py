"""SASS: the machine code the GPU runs (opcode table; listings and binaries as inputs)."""
