/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-check, run by the hmemloop wrapper (hmemloop(1)):
 *   --check --library PATH [--json]   will hmemloop work here, and why not
 *   --settings text|man|markdown|names   the settings list (hml_config.h)
 * Exit status of --check: 0 when hmemloop can work here, 1 when it cannot
 * (the output says why), 2 on a usage error.
 */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hml_config.h"

void *check_open(const char *name, int flags, char path[PATH_MAX],
		 char error[256])
{
	void *h = dlopen(name, RTLD_NOW | flags);
	struct link_map *map;

	if (!h)
		snprintf(error, 256, "%s", dlerror());
	else if (!dlinfo(h, RTLD_DI_LINKMAP, &map) && map->l_name &&
		 !realpath(map->l_name, path))
		snprintf(path, PATH_MAX, "%s", map->l_name);
	return h;
}

/* After libfabric, opened RTLD_GLOBAL as a program's, and bound lazily
 * as a preloaded library is. */
static void check_lib(struct check *c)
{
	void *h = dlopen(c->lib.path, RTLD_LAZY | RTLD_LOCAL);

	if (!h) {
		snprintf(c->lib.error, sizeof(c->lib.error), "%s", dlerror());
		return;
	}
	c->lib.version = dlsym(h, "hmemloop_version");
	c->lib.loaded = c->lib.version;
	if (!c->lib.loaded)
		snprintf(c->lib.error, sizeof(c->lib.error),
			 "it is not libhmemloop (no hmemloop_version)");
}

static bool rdm(const struct check *c)
{
	for (int i = 0; i < c->fabric.nprovs; i++)
		if (c->fabric.provs[i].rdm)
			return true;
	return false;
}

/* The first reason interception will not happen, else what it does. */
static void verdict(struct check *c)
{
	const char *why = NULL;

	if (!c->lib.loaded)
		why = "the library cannot be loaded";
	else if (!hml_config.enable)
		why = "HMEMLOOP_ENABLE is not 1: the library only forwards";
	else if (!c->fabric.loaded)
		why = "libfabric cannot be loaded";
	else if (!rdm(c))
		why = "no provider offers reliable datagram (FI_EP_RDM) "
		      "endpoints; connected endpoints pass through";
	else if (!c->cuda.loaded)
		why = "the CUDA driver cannot be loaded: device memory is not "
		      "recognised, every operation passes through";
	else if (!c->cuda.copies)
		why = "the CUDA driver cannot allocate and copy: hmemloop's "
		      "copies would fail";
	c->works = !why;
	snprintf(c->why, sizeof(c->why), "%s", why ? why :
		 "operations between endpoints of one process that touch "
		 "device memory are copied with the CUDA driver");
}

static int usage(void)
{
	fprintf(stderr, "usage: hmemloop-check --check --library PATH [--json]\n"
		"       hmemloop-check --settings text|man|markdown|names\n");
	return 2;
}

int main(int argc, char **argv)
{
	static struct check c;
	bool check = false, json = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--settings") && i + 1 < argc)
			return settings_doc(argv[i + 1]);
		else if (!strcmp(argv[i], "--check"))
			check = true;
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--library") && i + 1 < argc)
			c.lib.path = argv[++i];
		else
			return usage();
	}
	if (!check || !c.lib.path)
		return usage();
	hml_config_load();
	check_fabric(&c);
	check_lib(&c);
	check_cuda(&c);
	verdict(&c);
	if (json)
		check_print_json(&c);
	else
		check_print_text(&c);
	return c.works ? 0 : 1;
}
