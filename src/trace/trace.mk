# trace module: the trace writer (simulator and executor) and the reader
# behind `merak trace summary|diff`.
libmerak_la_SOURCES += src/trace/trace.c src/trace/tracefile.c
noinst_HEADERS += include/merak/trace.h include/merak/tracefile.h
TESTS += tests/cli-trace.sh tests/trace-format.sh tests/trace-nesting.sh
EXTRA_DIST += tests/cli-trace.sh tests/trace-format.sh tests/trace-nesting.sh tests/traces/a.json tests/traces/b.json tests/traces/other.json
