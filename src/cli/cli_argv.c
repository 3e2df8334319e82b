/* Values beyond getopt's one token per flag: Megatron's --data-path blend
 * (argparse's nargs='*') and Hugging Face's sizes (max_shard_size). */
#include "config.h"
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Megatron's blend, --data-path W1 P1 W2 P2 ... (argparse's nargs='*'):
 * the tokens after a --data-path whose first is a number, up to the next
 * flag, joined into its one value (mk_data_open reads the blend) in
 * argv, which shrinks; returns the new argc, or -1 (too long: the
 * message in mk_error_last). */
int mk_cli_join_blend(int argc, char **argv)
{
    static char buf[65536];
    for (int i = 1; i + 2 < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--data-path") || (strtod(argv[i + 1], &end), end == argv[i + 1] || *end)) continue;
        int j = i + 1;
        size_t len = 0;
        for (; j < argc && strncmp(argv[j], "--", 2); j++) {
            size_t k = strlen(argv[j]);
            if (len + k + 2 > sizeof buf) return mk_error_set("--data-path: the blend is too long");
            memcpy(buf + len, argv[j], k), len += k, buf[len++] = ' ';
        }
        buf[len - 1] = 0;
        argv[i + 1] = buf;
        memmove(argv + i + 2, argv + j, (argc - j + 1) * sizeof *argv); /* argv[argc] (NULL) too */
        return argc - (j - i - 2);
    }
    return argc;
}

/* Hugging Face's max_shard_size (huggingface_hub's parse_size_to_int):
 * an integer of bytes, or a number with KB, MB, GB, TB (10^3 steps) or
 * KiB, MiB, GiB, TiB (2^10 steps); 1 KB to 1 PB. */
int mk_cli_parse_size(const char *s, int64_t *out)
{
    static const struct { const char *unit; double mul; } u[] = {
        {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    for (size_t i = 0; end != s && !errno && isfinite(v) && i < sizeof u / sizeof *u; i++)
        if (!strcasecmp(end, u[i].unit) && v * u[i].mul >= 1e3 && v * u[i].mul <= 1e15) {
            *out = (int64_t)(v * u[i].mul);
            return 0;
        }
    return mk_error_set("--hf-max-shard-size '%s' is not a size from 1KB to 1PB (like 5GB, 500MB, 2GiB)", s);
}
