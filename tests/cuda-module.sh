#!/bin/sh
# The CUDA backend module (src/backend/backend_dl.c) on any machine: merak links
# no CUDA library; without a driver, with a module missing, unloadable (a
# library it needs is gone, as libcublas on a laptop) or of another build,
# `merak run --backend cuda` gives one line naming the problem and exit 2,
# `merak version` says why, and the default backend is the CPU.  A fake
# driver (MERAK_CUDA_DRIVER) reporting one device gets the loader past the
# driver check; with the build tree's module the CUDA runtime then finds no
# real driver here, and 0 devices (a real GPU machine: its devices).
. "$top_srcdir/tests/lib.sh"
command -v cc >/dev/null 2>&1 || { echo "no cc: skipped"; exit 77; }
check "merak needs no CUDA library" sh -c "! readelf -d '$MERAK' | grep -q -E 'cublas|cudart'"
t=$tmpdir
printf 'int cuInit(unsigned f) { return 0; }\nint cuDeviceGetCount(int *n) { *n = 1; return 0; }\n' >"$t/drv.c"
printf 'int mk_gone(void) { return 0; }\n' >"$t/gone.c"
printf 'int mk_gone(void);\nint mk_cuda_module_entry(void) { return mk_gone(); }\n' >"$t/bad.c"
printf 'void *mk_cuda_module_entry(const void *host) { return 0; }\n' >"$t/old.c"
cc -shared -fPIC -o "$t/fakecuda.so" "$t/drv.c" && cc -shared -fPIC -o "$t/libmkgone.so" "$t/gone.c" &&
  cc -shared -fPIC -o "$t/bad.so" "$t/bad.c" -L"$t" -lmkgone -Wl,-rpath,"$t" && rm "$t/libmkgone.so" &&
  cc -shared -fPIC -o "$t/old.so" "$t/old.c" || { echo "FAIL: cannot build the fake driver and modules"; exit 1; }

# run_cuda DESC PATTERN DRIVER MODULE: --backend cuda fails, version and the default say the same
run_cuda() {
  expect_fail "$1" "$2" -- env MERAK_CUDA_DRIVER="$3" MERAK_CUDA_MODULE="$4" "$MERAK" run --backend cuda --steps 1
  env MERAK_CUDA_DRIVER="$3" MERAK_CUDA_MODULE="$4" "$MERAK" version >"$t/v" 2>&1
  check "$1: merak version says why ($(grep cuda: "$t/v"))" grep -q -E "^cuda: no \(.*($2)" "$t/v"
  check "$1: the default backend is the cpu" env MERAK_CUDA_DRIVER="$3" MERAK_CUDA_MODULE="$4" \
    "$MERAK" run --steps 1 --json
}
if ! grep -q '^#define MK_HAVE_CUDA 1' "$top_builddir/config.h"; then
  run_cuda "built without CUDA" "built without CUDA" "$t/fakecuda.so" ""
  finish
fi
run_cuda "no driver" "no CUDA device is visible; no CUDA driver: .*nodriver.so" "$t/nodriver.so" ""
run_cuda "no module file" "could not be loaded: .*/no/such/merak_cuda.so" "$t/fakecuda.so" /no/such/merak_cuda.so
run_cuda "a library the module needs is gone" "could not be loaded: .*libmkgone.so" "$t/fakecuda.so" "$t/bad.so"
run_cuda "a module of another build" "old.so is of another build" "$t/fakecuda.so" "$t/old.so"

# the build tree's module, loaded by the build tree's merak (before an
# installed one, which may be of an older build)
MERAK_CUDA_DRIVER=$t/fakecuda.so "$MERAK" version >"$t/v" 2>&1
check "merak version loads the module ($(grep cuda: "$t/v"))" \
  grep -q -E '^cuda: yes \(cuBLAS, module /.*merak_cuda.so; [0-9]+ device\(s\) visible\)' "$t/v"
tree=$(cd "$top_builddir" && pwd -P)
check "the build tree's merak takes the build tree's module" grep -q "module $tree/src/cuda/.libs/merak_cuda.so" "$t/v"
# a merak outside the build tree (as an installed one) never takes it
cp "$MERAK" "$t/merak-elsewhere"
MERAK_CUDA_DRIVER=$t/fakecuda.so "$t/merak-elsewhere" version >"$t/v2" 2>&1
check "a merak outside the build tree does not take its module ($(grep cuda: "$t/v2"))" \
  sh -c "grep -q '^cuda: ' '$t/v2' && ! grep -q '$tree/src/cuda' '$t/v2'"
if grep -q '; 0 device(s)' "$t/v"; then
  expect_fail "module loaded, no device" "--backend cuda: no CUDA device is visible; use --backend cpu" -- \
    env MERAK_CUDA_DRIVER="$t/fakecuda.so" "$MERAK" run --backend cuda --steps 1
fi
finish
