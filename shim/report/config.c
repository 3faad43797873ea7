/* SPDX-License-Identifier: BSD-2-Clause */
/* The settings of HML_SETTINGS (hml_config.h): parsed from the
 * environment once, and told at info level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hml_config.h"
#include "hml_log.h"

struct hml_config hml_config;

#define HML_ENTRY(field, name, type, def, values, help) \
	{ name, HML_##type, def, values, help, offsetof(struct hml_config, field) },
const struct hml_setting hml_settings[] = {
	HML_SETTINGS(HML_ENTRY)
};
#undef HML_ENTRY
const size_t hml_nsettings = sizeof(hml_settings) / sizeof(hml_settings[0]);

static bool from_env[sizeof(hml_settings) / sizeof(hml_settings[0])];

static void *dst(const struct hml_setting *s)
{
	return (char *) &hml_config + s->offset;
}

/* Word i of a space-separated list, into buf; NULL past its end. */
static const char *word(const char *list, int i, char *buf, size_t n)
{
	size_t len;

	for (;;) {
		len = strcspn(list, " ");
		if (!len)
			return NULL;
		if (!i--)
			break;
		list += len + (list[len] == ' ');
	}
	if (len >= n)
		len = n - 1;
	memcpy(buf, list, len);
	buf[len] = '\0';
	return buf;
}

static int value_index(const char *values, const char *s)
{
	char w[32];

	for (int i = 0; word(values, i, w, sizeof(w)); i++)
		if (!strcmp(w, s))
			return i;
	return -1;
}

static void warn_bad(const struct hml_setting *v, const char *s)
{
	char accepted[128] = "", w[32];

	for (int i = 0; word(v->values, i, w, sizeof(w)); i++) {
		strncat(accepted, i ? ", " : "", sizeof(accepted) - strlen(accepted) - 1);
		strncat(accepted, w, sizeof(accepted) - strlen(accepted) - 1);
	}
	hml_warn("%s=%s is not one of %s; using %s", v->name, s, accepted,
		 v->def);
}

/* A string setting takes any value where it lists none, else a word of
 * its list, where the word PATH stands for any value with a '/'. */
static bool string_ok(const struct hml_setting *v, const char *s)
{
	char w[32];

	if (!v->values[0])
		return true;
	for (int i = 0; word(v->values, i, w, sizeof(w)); i++)
		if (!strcmp(w, "PATH") ? strchr(s, '/') != NULL :
					 !strcmp(w, s))
			return true;
	return false;
}

/* Set v from s; false (and a warning) where s is not accepted. */
static bool set(const struct hml_setting *v, const char *s)
{
	int i;
	bool ok;

	if (v->type == HML_STRING) {
		ok = string_ok(v, s);
		if (!ok)
			warn_bad(v, s);
		*(const char **) dst(v) = ok ? s : v->def;
		return ok;
	}
	i = value_index(v->values, s);
	ok = i >= 0;
	if (!ok) {
		warn_bad(v, s);
		i = value_index(v->values, v->def);
	}
	if (v->type == HML_BOOL)
		*(bool *) dst(v) = i;
	else
		*(int *) dst(v) = i;
	return ok;
}

const char *hml_config_value(size_t i)
{
	static char buf[sizeof(hml_settings) / sizeof(hml_settings[0])][32];
	const struct hml_setting *v = &hml_settings[i];
	int k;

	if (v->type == HML_STRING)
		return *(const char **) dst(v);
	k = v->type == HML_BOOL ? *(bool *) dst(v) : *(int *) dst(v);
	return word(v->values, k, buf[i], sizeof(buf[i]));
}

bool hml_config_from_env(size_t i)
{
	return from_env[i];
}

void hml_config_log(void)
{
	char line[400];
	size_t n = 0;

	for (size_t i = 0; i < hml_nsettings && n < sizeof(line); i++)
		n += snprintf(line + n, sizeof(line) - n, "%s%s=%s%s",
			      i ? ", " : "", hml_settings[i].name,
			      hml_config_value(i),
			      from_env[i] ? " (environment)" : "");
	hml_info("settings: %s", line);
}

void hml_config_load(void)
{
	/* Defaults first, so that a warning about one bad value is printed
	 * under the log level the environment asked for. */
	for (size_t i = 0; i < hml_nsettings; i++)
		set(&hml_settings[i], hml_settings[i].def);
	for (size_t i = 0; i < hml_nsettings; i++) {
		const char *s = getenv(hml_settings[i].name);

		if (s)
			from_env[i] = set(&hml_settings[i], s);
	}
}
