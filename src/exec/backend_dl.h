/* Why the CUDA backend is unavailable, for `merak version` and the
 * --backend cuda error (src/exec/backend_dl.c loads the module). */
#ifndef MERAK_EXEC_BACKEND_DL_H
#define MERAK_EXEC_BACKEND_DL_H

/* NULL once the CUDA module is loaded, else the reason it is not (no
 * driver, no device, module missing or unloadable, built without CUDA). */
const char *mk_cuda_unavailable(void);
/* The loaded module's file, or NULL. */
const char *mk_cuda_module_path(void);

#endif
