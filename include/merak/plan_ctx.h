/* The resolved plan (mk_plan_ctx_t, mk_plan_resolve) is declared in
 * merak/plan.h; this header stays for the library's own includes (not
 * installed). */
#ifndef MERAK_PLAN_CTX_H
#define MERAK_PLAN_CTX_H
#include "merak/plan.h"
#endif
