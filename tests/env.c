/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The test settings: the one list of the environment variables the test
 * programs read (tests/README.md, Settings, says what each does; the
 * harness's own are there too), and t_env, the only way they read them.
 */
#include <stdlib.h>
#include <string.h>

#include "hmltest.h"

static const struct {
	const char *name;
	const char *def;		/* NULL: unset */
} settings[] = {
	{ "HMEMLOOP_TEST_WAIT", "10" },
	{ "HMEMLOOP_TEST_CUDA", "auto" },
	{ "HMEMLOOP_TEST_FRESH", NULL },
	{ "HMEMLOOP_FUZZ_SEED", "1" },
	{ "HMEMLOOP_FUZZ_SECONDS", "20" },
	{ "HMEMLOOP_FUZZ_FEATURES", "-1" },
	{ "HMEMLOOP_FUZZ_CHILD", NULL },
	{ "HMEMLOOP_STRESS_OPS", "100000" },
	{ "HMEMLOOP_STRESS_HOST", NULL },
};

const char *t_env(const char *name)
{
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		const char *v;

		if (strcmp(settings[i].name, name))
			continue;
		v = getenv(name);
		/* Set but empty is unset, as a shell's NAME= means. */
		return v && *v ? v : settings[i].def;
	}
	t_fail("test bug: %s is not a test setting (tests/env.c)", name);
}

double t_env_num(const char *name)
{
	const char *v = t_env(name);

	return v ? strtod(v, NULL) : 0;
}
