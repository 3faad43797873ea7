#include <stdlib.h>
#include <string.h>

#include "hml_config.h"
#include "hml_log.h"

struct hml_config hml_config = {
	.log_level = HML_LOG_WARN,
};

enum var_type {
	VAR_BOOL,
	VAR_ENUM,
	VAR_STRING,
};

/* The one table of settings. Each entry: name, type, default, accepted
 * values (enums), where it goes, and what it does (README repeats it). */
static const struct var {
	const char *name;
	enum var_type type;
	const char *def;
	const char *const *values;
	void *dst;
	const char *help;
} vars[] = {
	{ "HMEMLOOP_ENABLE", VAR_BOOL, "0", NULL, &hml_config.enable,
	  "1 turns interception on; otherwise the library only forwards" },
	{ "HMEMLOOP_LOG", VAR_ENUM, "warn",
	  (const char *const[]) { "warn", "info", "debug", NULL },
	  &hml_config.log_level, "what to log on stderr" },
	{ "HMEMLOOP_CUDA_LIBRARY", VAR_STRING, "libcuda.so.1", NULL,
	  &hml_config.cuda_library, "the CUDA driver library to open" },
	{ "HMEMLOOP_SELF", VAR_ENUM, "device",
	  (const char *const[]) { "device", "all", NULL }, &hml_config.self,
	  "which same-process operations to perform locally: those touching "
	  "device memory, or all of them" },
	{ "HMEMLOOP_HMEM", VAR_ENUM, "auto",
	  (const char *const[]) { "off", "auto", "on", NULL }, &hml_config.hmem,
	  "ask the provider for FI_HMEM on the application's behalf: off, "
	  "where its hints ask for FI_MR_HMEM (auto), or always (on), "
	  "wherever CUDA registrations work" },
};

static const char *const bool_values[] = { "0", "1", NULL };

static int value_index(const char *const *values, const char *s)
{
	for (int i = 0; values[i]; i++)
		if (!strcmp(values[i], s))
			return i;
	return -1;
}

static void warn_bad(const struct var *v, const char *s,
		     const char *const *values)
{
	char accepted[128] = "";

	for (int i = 0; values[i]; i++) {
		strncat(accepted, i ? ", " : "", sizeof(accepted) - strlen(accepted) - 1);
		strncat(accepted, values[i], sizeof(accepted) - strlen(accepted) - 1);
	}
	hml_warn("%s=%s is not one of %s; using %s", v->name, s, accepted,
		 v->def);
}

static void set(const struct var *v, const char *s)
{
	const char *const *values = v->type == VAR_BOOL ? bool_values : v->values;
	int i;

	switch (v->type) {
	case VAR_STRING:
		*(const char **) v->dst = s;
		return;
	case VAR_BOOL:
	case VAR_ENUM:
		i = value_index(values, s);
		if (i < 0) {
			warn_bad(v, s, values);
			i = value_index(values, v->def);
		}
		if (v->type == VAR_BOOL)
			*(bool *) v->dst = i;
		else
			*(int *) v->dst = i;
		return;
	}
}

void hml_config_load(void)
{
	/* Defaults first, so that a warning about one bad value is printed
	 * under the log level the environment asked for. */
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		set(&vars[i], vars[i].def);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *s = getenv(vars[i].name);

		if (s)
			set(&vars[i], s);
	}
}
