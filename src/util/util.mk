# util module: errors, files written atomically (fileio.c), bounded file
# reading, JSON reading/writing helpers, the streaming JSON reader.
libmerak_la_SOURCES += src/util/error.c src/util/fileio.c src/util/jsonio.c src/util/readfile.c \
	src/util/json_stream.c src/util/testenv.c src/util/half.c
noinst_HEADERS += include/merak/half.h include/merak/half_rule.h include/merak/vec.h include/merak/fileio.h include/merak/jsonio.h include/merak/readfile.h include/merak/checked.h

# Files written (fileio.c): refusals, symlinks, stale temporaries, signals, full disk.
check_PROGRAMS += tests/test_fileio
tests_test_fileio_SOURCES = tests/test_fileio.c tests/check.h
TESTS += tests/test_fileio tests/files.sh tests/files-full.sh tests/files-clash.sh
EXTRA_DIST += tests/files.sh tests/files-full.sh tests/files-clash.sh tests/lib.sh

# 16-bit floats (half.c): rounding to nearest even against a by-distance reference.
check_PROGRAMS += tests/test_half
tests_test_half_SOURCES = tests/test_half.c tests/check.h
TESTS += tests/test_half
