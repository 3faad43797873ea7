/* SPDX-License-Identifier: BSD-2-Clause */
/* Log lines on stderr, each "hmemloop: <pid>: <level>: <message>". */
#ifndef HML_LOG_H
#define HML_LOG_H

#include <stdbool.h>

#include "hml_config.h"

enum hml_log_level {
	HML_LOG_WARN,
	HML_LOG_INFO,
	HML_LOG_DEBUG,
};

void hml_log(enum hml_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Set by a program that reads the settings beside the library in its
 * process (hmemloop-bench under the wrapper), where the library says them. */
extern bool hml_log_quiet;

#define hml_warn(...)	hml_log(HML_LOG_WARN, __VA_ARGS__)
#define hml_info(...)	hml_log(HML_LOG_INFO, __VA_ARGS__)
/* The level asked for is read in place: debug lines are asked for on
 * every operation. */
#define hml_debug(...)	do { if (__builtin_expect(hml_config.log_level >= \
					      HML_LOG_DEBUG, 0)) \
				hml_log(HML_LOG_DEBUG, __VA_ARGS__); } while (0)

/* Once per call site: a failure that repeats on every operation would
 * otherwise flood the application's stderr. */
#define hml_log_once(level, ...) do {					\
		static int hml_said_;					\
		if (!__atomic_exchange_n(&hml_said_, 1, __ATOMIC_RELAXED)) \
			hml_log(level, __VA_ARGS__);			\
	} while (0)
#define hml_warn_once(...)	hml_log_once(HML_LOG_WARN, __VA_ARGS__)
#define hml_info_once(...)	hml_log_once(HML_LOG_INFO, __VA_ARGS__)

#endif
