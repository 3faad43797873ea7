/* SPDX-License-Identifier: BSD-2-Clause */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "hml_config.h"
#include "hml_log.h"

static const char *const level_names[] = {
	[HML_LOG_WARN] = "warn",
	[HML_LOG_INFO] = "info",
	[HML_LOG_DEBUG] = "debug",
};

bool hml_log_quiet;

static bool enabled(enum hml_log_level level)
{
	return (int) level <= hml_config.log_level && !hml_log_quiet;
}

void hml_log(enum hml_log_level level, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	if (!enabled(level))
		return;

	/* One write per line, so lines of several threads do not interleave. */
	n = snprintf(line, sizeof(line), "hmemloop: %d: %s: ",
		     (int) getpid(), level_names[level]);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int) sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
