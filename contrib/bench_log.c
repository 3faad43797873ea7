/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The log of the library's settings parser (shim/report/config.c) as the
 * bench links it: where the library is loaded in this process too (under
 * the wrapper), it has said each warning already, so the bench's copy
 * says nothing; elsewhere (--no-shim, configuration A) it says them.
 */
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hml_log.h"

static int is_library(struct dl_phdr_info *info, size_t size, void *data)
{
	(void) size;
	(void) data;
	return info->dlpi_name && strstr(info->dlpi_name, "libhmemloop");
}

void hml_log(enum hml_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "warn", "info", "debug" };
	va_list ap;

	if ((int) level > hml_config.log_level ||
	    dl_iterate_phdr(is_library, NULL))
		return;
	fprintf(stderr, "hmemloop: %d: %s: ", (int) getpid(), names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
