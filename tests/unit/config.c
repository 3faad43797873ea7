/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The settings parser (shim/report/config.c): each setting's default without its
 * variable; each accepted value parsed and marked as the environment's; a
 * value not accepted (another word, a prefix, empty, a string setting's
 * value that is none of its words) gives the default and is not marked; a
 * value read back as its variable would spell it.
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdlib.h>
#include <string.h>

#include "hml_config.h"
#include "hml_log.h"
#include "unit.h"

static size_t index_of(const char *name)
{
	for (size_t i = 0; i < hml_nsettings; i++)
		if (!strcmp(hml_settings[i].name, name))
			return i;
	u_check(0, "no setting %s", name);
	return 0;
}

/* Setting name read back as want; from the environment or not. */
static void expect(const char *name, const char *want, bool env)
{
	size_t i = index_of(name);
	const char *got = hml_config_value(i);

	u_check(got && !strcmp(got, want), "%s: %s, expected %s", name,
		got ? got : "(null)", want);
	u_check(hml_config_from_env(i) == env, "%s: %sfrom the environment",
		name, env ? "not " : "");
}

/* HMEMLOOP_STATS: 0, 1, or a path, which is a value with a '/'; any
 * other value (a boolean's word, a file name alone) is not a path. */
static void stats(void)
{
	static const char *const good[] = {
		"0", "1", "/tmp/hmemloop.%p.json", "./stats.json", "a/b",
	};
	static const char *const bad[] = {
		"true", "yes", "on", "off", "stats.json", "PATH", "",
	};

	for (size_t i = 0; i < hml_nsettings; i++)
		unsetenv(hml_settings[i].name);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		setenv("HMEMLOOP_STATS", good[i], 1);
		hml_config_load();
		expect("HMEMLOOP_STATS", good[i], true);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("HMEMLOOP_STATS", bad[i], 1);
		hml_config_load();
		expect("HMEMLOOP_STATS", "0", false);
	}
}

int main(void)
{
	for (size_t i = 0; i < hml_nsettings; i++)
		unsetenv(hml_settings[i].name);
	hml_config_load();
	u_check(!hml_config.enable && hml_config.log_level == HML_LOG_WARN &&
		!strcmp(hml_config.cuda_library, "libcuda.so.1") &&
		hml_config.hmem == HML_HMEM_AUTO, "the defaults");
	for (size_t i = 0; i < hml_nsettings; i++)
		u_check(!strcmp(hml_config_value(i), hml_settings[i].def),
			"%s: %s, not its default %s", hml_settings[i].name,
			hml_config_value(i), hml_settings[i].def);

	setenv("HMEMLOOP_ENABLE", "1", 1);
	setenv("HMEMLOOP_ASYNC", "0", 1);
	setenv("HMEMLOOP_HMEM", "off", 1);
	setenv("HMEMLOOP_CUDA_LIBRARY", "/opt/x/libcuda.so", 1);
	hml_config_load();
	u_check(hml_config.enable && !hml_config.async &&
		hml_config.hmem == HML_HMEM_OFF &&
		!strcmp(hml_config.cuda_library, "/opt/x/libcuda.so"),
		"the values given");
	expect("HMEMLOOP_ENABLE", "1", true);
	expect("HMEMLOOP_ASYNC", "0", true);
	expect("HMEMLOOP_HMEM", "off", true);
	expect("HMEMLOOP_CUDA_LIBRARY", "/opt/x/libcuda.so", true);
	setenv("HMEMLOOP_HMEM", "on", 1);
	hml_config_load();
	u_check(hml_config.hmem == HML_HMEM_ON, "HMEMLOOP_HMEM=on");

	/* Not accepted: the default, and not the environment's. The
	 * warnings go to stderr, at the default level. */
	setenv("HMEMLOOP_ENABLE", "yes", 1);
	setenv("HMEMLOOP_ASYNC", "00", 1);
	setenv("HMEMLOOP_HMEM", "", 1);
	setenv("HMEMLOOP_LOG", "device", 1);
	hml_config_load();
	u_check(!hml_config.enable, "HMEMLOOP_ENABLE=yes enables");
	expect("HMEMLOOP_ENABLE", "0", false);
	expect("HMEMLOOP_ASYNC", "1", false);
	expect("HMEMLOOP_HMEM", "auto", false);
	expect("HMEMLOOP_LOG", "warn", false);

	/* A value that is a word of another setting's list, and the last
	 * word of its own. */
	setenv("HMEMLOOP_LOG", "debug", 1);
	setenv("HMEMLOOP_HMEM", "auto on", 1);
	hml_config_load();
	expect("HMEMLOOP_LOG", "debug", true);
	expect("HMEMLOOP_HMEM", "auto", false);
	stats();
	return u_done("settings: defaults, values, values not accepted, "
		      "HMEMLOOP_STATS's paths");
}
