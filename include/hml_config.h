/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Settings, read once from HMEMLOOP_* environment variables at load.
 *
 * HML_SETTINGS is the one list of them, a line each:
 *   X(field, NAME, TYPE, default, accepted values, help)
 * TYPE is BOOL, ENUM (the values, space-separated, in the order of the
 * field's enum) or STRING (any value where none are listed; PATH in the
 * list stands for any value with a '/'). From it come struct hml_config, the parser and
 * the info line of the values in effect (config.c), and hmemloop --help's,
 * hmemloop(7)'s and README's settings tables (hmemloop-check --settings;
 * tests/settings compares README's). Help is plain text in which `x`
 * marks a literal.
 */
#ifndef HML_CONFIG_H
#define HML_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define HML_SETTINGS(X)							\
	X(enable, "HMEMLOOP_ENABLE", BOOL, "0", "0 1",			\
	  "`1` turns interception on; otherwise the library only forwards") \
	X(log_level, "HMEMLOOP_LOG", ENUM, "warn", "warn info debug",	\
	  "what to log on stderr: `warn`, `info` or `debug`; lines start " \
	  "`hmemloop: PID:`")						\
	X(cuda_library, "HMEMLOOP_CUDA_LIBRARY", STRING, "libcuda.so.1", "", \
	  "the CUDA driver library to open (never linked)")		\
	X(async, "HMEMLOOP_ASYNC", BOOL, "1", "0 1",			\
	  "`1`: a same-process operation returns once its copy is queued, " \
	  "and completes when a CQ or counter read finds it landed; `0`: " \
	  "each operation waits for its copy before it returns")		\
	X(batch, "HMEMLOOP_BATCH", BOOL, "1", "0 1",			\
	  "`1`: with `HMEMLOOP_ASYNC=1` and a driver of CUDA 13 or later, " \
	  "copies queued together go to the driver in one "		\
	  "`cuMemcpyBatchAsync`; `0`: one `cuMemcpyAsync` each")	\
	X(kernel, "HMEMLOOP_KERNEL", BOOL, "1", "0 1",			\
	  "`1`: a batch of copies from or to device memory, each within " \
	  "one allocation of the copying context, device or pinned host " \
	  "memory, runs as one launch of hmemloop's copy kernel on the " \
	  "GPU's cores; `0`: it goes to the copy engines "		\
	  "(`cuMemcpyBatchAsync`)")					\
	X(hmem, "HMEMLOOP_HMEM", ENUM, "auto", "off auto on",		\
	  "ask the provider for `FI_HMEM` on the application's behalf, for " \
	  "device memory between processes (see Between processes): " \
	  "`off`; `auto`, where the hints ask for `FI_MR_HMEM` without " \
	  "`FI_HMEM`; `on`, wherever the hints lack `FI_HMEM`. Only where " \
	  "CUDA registrations work")					\
	X(stats, "HMEMLOOP_STATS", STRING, "0", "0 1 PATH",		\
	  "`1`: when the process exits, a summary on stderr of what hmemloop " \
	  "did: operations done here by kind and direction with bytes, errors " \
	  "by code, messages staged, receives taken back, receives found " \
	  "held, operations passed through by reason (see hmemloop(7)); a " \
	  "path (a value with a " \
	  "`/`, such as `./stats.json`): the same as JSON in a new file " \
	  "there, `%p` replaced by the process id, of mode 0600; a file or " \
	  "symbolic link already there is left as it is")

enum hml_hmem_mode {
	HML_HMEM_OFF,
	HML_HMEM_AUTO,		/* hints with FI_MR_HMEM and without FI_HMEM */
	HML_HMEM_ON,		/* any hints without FI_HMEM */
};

/* BOOL: bool; ENUM: int, the index of the value (log_level is an enum
 * hml_log_level, hmem an enum hml_hmem_mode). */
#define HML_CTYPE_BOOL bool
#define HML_CTYPE_ENUM int
#define HML_CTYPE_STRING const char *
#define HML_FIELD(field, name, type, def, values, help) HML_CTYPE_##type field;
struct hml_config {
	HML_SETTINGS(HML_FIELD)
};
#undef HML_FIELD

extern struct hml_config hml_config;

enum hml_setting_type { HML_BOOL, HML_ENUM, HML_STRING };

struct hml_setting {
	const char *name;
	enum hml_setting_type type;
	const char *def;
	const char *values;
	const char *help;
	size_t offset;			/* in struct hml_config */
};

extern const struct hml_setting hml_settings[];
extern const size_t hml_nsettings;

void hml_config_load(void);
/* One info line of the values in effect, "(environment)" after those the
 * environment gave. */
void hml_config_log(void);
/* Setting i's value in effect, as its variable would spell it. */
const char *hml_config_value(size_t i);
/* Whether the environment gave setting i its value (a bad one does not). */
bool hml_config_from_env(size_t i);

#endif
