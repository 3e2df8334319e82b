/* Numbers in human-readable output, in the unit that fits their magnitude
 * (cli.h: mk_fmt_seconds, mk_fmt_bytes, mk_fmt_count, and the mk_unit_*
 * pickers for a table's column).  JSON output keeps plain SI numbers;
 * only what a person reads goes through here. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int mk_unit_decimals(double ref, mk_unit_t u, int digits)
{
    double a = fabs(ref / u.f);
    int dec = digits - (a >= 100 ? 3 : a >= 10 ? 2 : 1);
    return dec < 0 ? 0 : dec;
}

char *mk_fmt_in(char *buf, size_t n, double v, mk_unit_t u, int dec)
{
    if (!isfinite(v)) snprintf(buf, n, "%g", v);
    else snprintf(buf, n, "%.*f", dec, v / u.f);
    return buf;
}

/* The largest of nu units (descending factors) that shows |ref| as at least
 * 1 once rounded (999.96 ms is "1 s", not "1000 ms"); 0 and non-finite
 * values take u[zero]. */
static mk_unit_t pick(double ref, const double *f, const char *const *u, int nu, int zero)
{
    double a = fabs(ref);
    int k = 0;
    if (!isfinite(a) || a == 0) k = zero;
    else
        while (k < nu - 1 && a / f[k] < 0.9995) k++;
    return (mk_unit_t){f[k], u[k]};
}

mk_unit_t mk_unit_seconds(double ref)
{
    static const double f[] = {3600, 60, 1, 1e-3, 1e-6, 1e-9};
    static const char *const u[] = {"h", "min", "s", "ms", "µs", "ns"};
    if (fabs(ref) < 59.95) return pick(ref, f + 2, u + 2, 4, 0); /* minutes and hours only past a minute */
    return pick(ref, f, u, 3, 2);
}

mk_unit_t mk_unit_bytes(double ref)
{
    static const double f[] = {1099511627776.0, 1073741824.0, 1048576.0, 1024.0, 1};
    static const char *const u[] = {"TiB", "GiB", "MiB", "KiB", "B"};
    return pick(ref, f, u, 5, 4);
}

mk_unit_t mk_unit_count(double ref)
{
    static const double f[] = {1e12, 1e9, 1e6, 1e3, 1};
    static const char *const u[] = {"T", "B", "M", "K", ""};
    return pick(ref, f, u, 5, 4);
}

/* "number unit" (a count without a unit: just the number): `digits`
 * significant digits, trailing zeros dropped (0.70 ms -> "0.7 ms"). */
static char *with_unit(char *buf, size_t n, double v, mk_unit_t u, int digits)
{
    char num[64];
    mk_fmt_in(num, sizeof num, v, u, mk_unit_decimals(v, u, digits));
    char *dot = strchr(num, '.');
    if (dot) {
        char *e = num + strlen(num) - 1;
        while (e > dot && *e == '0') *e-- = 0;
        if (e == dot) *e = 0;
    }
    snprintf(buf, n, *u.name ? "%s %s" : "%s", num, u.name);
    return buf;
}

char *mk_fmt_seconds(char *buf, size_t n, double s) { return with_unit(buf, n, s, mk_unit_seconds(s), 4); }
char *mk_fmt_bytes(char *buf, size_t n, double b) { return with_unit(buf, n, b, mk_unit_bytes(b), 3); }
char *mk_fmt_count(char *buf, size_t n, double x) { return with_unit(buf, n, x, mk_unit_count(x), 3); }

int mk_fmt_width(const char *s, int w)
{
    for (; *s; s++) w += ((unsigned char)*s & 0xc0) == 0x80; /* UTF-8 continuation bytes take no column */
    return w;
}
