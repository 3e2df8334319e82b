/* Numbers in human-readable output, in the unit that fits their magnitude
 * (cli.h: mk_fmt_seconds, mk_fmt_bytes, mk_fmt_count).  JSON output keeps
 * plain SI numbers; only what a person reads goes through here. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* v (>= 0, already in the unit) with `digits` significant digits (3 or 4)
 * and no exponent: 0.7 -> "0.7", 12.34 -> "12.3", 221 -> "221"; trailing
 * zeros dropped. */
static void sig(char *buf, size_t n, double v, int digits, const char *unit)
{
    int dec = digits - (v >= 100 ? 3 : v >= 10 ? 2 : 1);
    if (dec < 0) dec = 0;
    char num[48];
    snprintf(num, sizeof num, "%.*f", dec, v);
    for (char *e = num + strlen(num) - 1; dec > 0 && e > num && (*e == '0' || *e == '.'); e--) {
        char c = *e;
        *e = 0;
        if (c == '.') break;
    }
    snprintf(buf, n, "%s %s", num, unit);
}

/* The largest unit of u[] (descending factors f[]) that shows |v| as at
 * least 1 once rounded (999.96 ms prints as "1 s", not "1000 ms"); 0 and
 * non-finite values in u[zero]. */
static void scaled(char *buf, size_t n, double v, const double *f, const char *const *u, int nu, int zero,
                   int digits)
{
    double a = fabs(v);
    if (!isfinite(v) || a == 0) {
        snprintf(buf, n, "%g %s", v, u[zero]);
        return;
    }
    int k = 0;
    while (k < nu - 1 && a / f[k] < 0.9995) k++;
    char tmp[64];
    sig(tmp, sizeof tmp, a / f[k], digits, u[k]);
    snprintf(buf, n, "%s%s", v < 0 ? "-" : "", tmp);
}

char *mk_fmt_seconds(char *buf, size_t n, double s)
{
    static const double f[] = {3600, 60, 1, 1e-3, 1e-6, 1e-9};
    static const char *const u[] = {"h", "min", "s", "ms", "µs", "ns"};
    if (fabs(s) < 59.95) scaled(buf, n, s, f + 2, u + 2, 4, 0, 4); /* minutes and hours only past a minute */
    else scaled(buf, n, s, f, u, 3, 2, 4);
    return buf;
}

char *mk_fmt_bytes(char *buf, size_t n, double bytes)
{
    static const double f[] = {1099511627776.0, 1073741824.0, 1048576.0, 1024.0, 1};
    static const char *const u[] = {"TiB", "GiB", "MiB", "KiB", "B"};
    scaled(buf, n, bytes, f, u, 5, 4, 3);
    return buf;
}

char *mk_fmt_count(char *buf, size_t n, double x)
{
    static const double f[] = {1e12, 1e9, 1e6, 1e3, 1};
    static const char *const u[] = {"T", "B", "M", "K", ""};
    scaled(buf, n, x, f, u, 5, 4, 3);
    size_t l = strlen(buf);
    if (l && buf[l - 1] == ' ') buf[l - 1] = 0; /* a plain count: no unit, no space */
    return buf;
}
