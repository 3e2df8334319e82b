# src module: sources and tests (see Makefile.am)
