/* test_gpt_gradcmp A B [TOL]: compare two gradient dumps of `merak run --dump-grads`
 * tensor by tensor: norm(A - B) / norm(B) <= TOL (default 1e-5).  Prints
 * the worst tensor; exit 0 when all pass, 1 otherwise, 2 on bad files. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char name[128]; int64_t n; float *v; } tensor_t;

static int load(const char *path, tensor_t **out)
{
    FILE *f = fopen(path, "rb");
    char magic[8];
    int32_t count;
    if (!f || fread(magic, 1, 8, f) != 8 || memcmp(magic, "MKGRAD1\n", 8) || fread(&count, 4, 1, f) != 1) {
        fprintf(stderr, "gradcmp: cannot read %s\n", path);
        if (f) fclose(f);
        return -1;
    }
    tensor_t *t = calloc(count, sizeof *t);
    for (int i = 0; i < count; i++) {
        int32_t len;
        if (fread(&len, 4, 1, f) != 1 || len <= 0 || len >= 128 || fread(t[i].name, 1, len, f) != (size_t)len ||
            fread(&t[i].n, 8, 1, f) != 1) { fclose(f); return -1; }
        t[i].v = malloc(t[i].n * sizeof(float));
        if (fread(t[i].v, sizeof(float), t[i].n, f) != (size_t)t[i].n) { fclose(f); return -1; }
    }
    fclose(f);
    *out = t;
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: test_gpt_gradcmp A B [TOL]\n"); return 2; }
    double tol = argc > 3 ? atof(argv[3]) : 1e-5, worst = 0;
    tensor_t *a, *b;
    int na = load(argv[1], &a), nb = load(argv[2], &b), bad = 0;
    const char *wname = "";
    if (na < 0 || nb < 0 || na != nb) { fprintf(stderr, "gradcmp: tensor counts differ\n"); return 2; }
    for (int i = 0; i < na; i++) {
        if (strcmp(a[i].name, b[i].name) || a[i].n != b[i].n) {
            fprintf(stderr, "gradcmp: tensor %d differs in name or size\n", i);
            return 2;
        }
        double d = 0, w = 0;
        for (int64_t k = 0; k < a[i].n; k++) {
            d += ((double)a[i].v[k] - b[i].v[k]) * ((double)a[i].v[k] - b[i].v[k]);
            w += (double)b[i].v[k] * b[i].v[k];
        }
        double r = w > 0 ? sqrt(d / w) : sqrt(d);
        if (r > tol) { bad++; fprintf(stderr, "gradcmp: %s: relative difference %.3g > %.3g\n", a[i].name, r, tol); }
        if (r > worst) { worst = r; wname = a[i].name; }
    }
    printf("gradcmp: %d tensors, worst %.3g (%s)\n", na, worst, wname);
    return bad ? 1 : 0;
}
