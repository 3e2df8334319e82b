# backend module: mk_backend_new/mk_backend_free (every backend by name)
# and the CUDA module's loader (backend_dl.c: dlopens merak_cuda.so, built
# from src/cuda/, through the interface include/merak/cuda_module.h).
libmerak_la_SOURCES += src/backend/backend.c src/backend/backend_dl.c
noinst_HEADERS += include/merak/backend.h include/merak/rope.h
noinst_HEADERS += include/merak/cuda_module.h
