/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What every mode of hmemloop-bench shares: the options bench.c parses,
 * and the helpers the modes call. It calls none of them.
 */
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "hml_config.h"
#include "hml_log.h"

struct b_opts b_opt = {
	.min_size = 8,
	.max_size = 1UL << 30,
	.iters = 1000,
	.max_time = 1.0,
	.runs = 5,
	.msg_size = 64,
	.window = B_WINDOW,
	.worker = -1,
};

void b_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "hmemloop-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(2);
}

double b_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentiles: with few samples p99 is the largest. */
void b_stats(double *v, size_t n, struct b_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	s->n = n;
	s->min = v[0];
	s->max = v[n - 1];
	s->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	s->p99 = v[(n * 99 + 99) / 100 - 1];
}

const char *b_size_str(size_t n, char *buf, size_t len)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB" };
	int u = 0;

	while (u < 3 && n >= 1024 && !(n % 1024)) {
		n /= 1024;
		u++;
	}
	snprintf(buf, len, "%zu %s", n, unit[u]);
	return buf;
}

static int is_shim(struct dl_phdr_info *info, size_t size, void *data)
{
	(void) size;
	(void) data;
	return info->dlpi_name && strstr(info->dlpi_name, "libhmemloop");
}

bool b_shim_loaded(void)
{
	return dl_iterate_phdr(is_shim, NULL);
}

void b_settings_load(void)
{
	/* Under the wrapper the library has said each bad value already. */
	hml_log_quiet = b_shim_loaded();
	hml_config_load();
}

const char *b_setting(const char *name, bool *env)
{
	for (size_t i = 0; i < hml_nsettings; i++) {
		if (strcmp(hml_settings[i].name, name))
			continue;
		*env = hml_config_from_env(i);
		return hml_config_value(i);
	}
	b_die("%s is not a setting of hmemloop's", name);
}
