#include "config.h"
#include "cli.h"
int mk_cmd_sched(int argc, char **argv) { (void)argc; (void)argv; return 0; }
