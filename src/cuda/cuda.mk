# src/cuda module: sources and tests (see Makefile.am)
