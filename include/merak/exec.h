/* The executor's entry points are declared in merak/run.h (installed);
 * this header stays for the library's own includes (not installed). */
#ifndef MERAK_EXEC_H
#define MERAK_EXEC_H
#include "merak/run.h"
#endif
