/* SPDX-License-Identifier: BSD-2-Clause */
/* hmemloop-check: the findings as text, each with what it means, or as
 * JSON with the same fields. */
#include <stdio.h>

#include "check.h"
#include "hml_config.h"

static const char *const hmem_text[] = {
	[HMEM_NOT_GRANTED] = "FI_HMEM not granted",
	[HMEM_NO_CUDA] = "FI_HMEM granted, CUDA registrations refused "
			 "(libfabric's CUDA support did not start): "
			 "HMEMLOOP_HMEM leaves it alone",
	[HMEM_CUDA] = "FI_HMEM granted, CUDA registrations work: "
		      "HMEMLOOP_HMEM can ask for it between processes",
};

static const char *const hmem_json[] = {
	[HMEM_NOT_GRANTED] = "not granted",
	[HMEM_NO_CUDA] = "granted, no CUDA",
	[HMEM_CUDA] = "granted, CUDA",
};

static const char *source(size_t i)
{
	return hml_config_from_env(i) ? "environment" : "default";
}

void check_print_text(const struct check *c)
{
	if (c->fabric.loaded)
		printf("libfabric: %s, API %s (the libfabric.so.1 a program "
		       "loads here)\n", c->fabric.path, c->fabric.version);
	else
		printf("libfabric: cannot be loaded: %s\n", c->fabric.error);
	if (c->fabric.loaded && !c->fabric.nprovs)
		printf("providers: none: %s\n", c->fabric.error);
	for (int i = 0; i < c->fabric.nprovs; i++) {
		const struct prov *p = &c->fabric.provs[i];

		printf("provider %s %s: %s; %s\n", p->name, p->version,
		       p->rdm ? "RDM endpoints, same-process operations served" :
				"no RDM endpoints, passes through",
		       hmem_text[p->hmem]);
	}
	if (!c->cuda.loaded)
		printf("CUDA driver: %s cannot be used: %s\n", c->cuda.library,
		       c->cuda.error);
	else
		printf("CUDA driver: %s (%s), version %d.%d, %d GPU%s\n",
		       c->cuda.library, c->cuda.path, c->cuda.version / 1000,
		       c->cuda.version % 1000 / 10, c->cuda.ngpus,
		       c->cuda.ngpus == 1 ? "" : "s");
	for (int i = 0; i < c->cuda.ngpus && i < CHECK_GPUS; i++)
		printf("GPU %d: %s, %zu MiB\n", i, c->cuda.gpus[i].name,
		       c->cuda.gpus[i].mem >> 20);
	if (c->cuda.loaded)
		printf("allocation and copy: %s%s\n",
		       c->cuda.copies ? "work" : "fail: ",
		       c->cuda.copies ? "" : c->cuda.error);
	for (size_t i = 0; i < hml_nsettings; i++)
		printf("setting %s=%s (%s)\n", hml_settings[i].name,
		       hml_config_value(i), source(i));
	if (c->lib.loaded)
		printf("library: %s, version %s\n", c->lib.path, c->lib.version);
	else
		printf("library: %s cannot be loaded: %s\n", c->lib.path,
		       c->lib.error);
	printf("same-process interception: %s: %s\n", c->works ? "yes" : "no",
	       c->why);
}

/* A JSON string; the values printed here hold no control characters
 * but may hold quotes and backslashes (paths, dlerror). */
static void str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static void key(const char *k, const char *v, const char *end)
{
	str(k);
	printf(": ");
	str(v);
	printf("%s", end);
}

static const char *yes(bool b)
{
	return b ? "true" : "false";
}

void check_print_json(const struct check *c)
{
	printf("{\n  \"libfabric\": {\"loaded\": %s, ", yes(c->fabric.loaded));
	key("path", c->fabric.path, ", ");
	key("version", c->fabric.version, ", ");
	key("error", c->fabric.error, "},\n  \"providers\": [");
	for (int i = 0; i < c->fabric.nprovs; i++) {
		const struct prov *p = &c->fabric.provs[i];

		printf("%s\n    {", i ? "," : "");
		key("name", p->name, ", ");
		key("version", p->version, ", ");
		printf("\"rdm\": %s, ", yes(p->rdm));
		key("fi_hmem", hmem_json[p->hmem], "}");
	}
	printf("],\n  \"cuda\": {\"loaded\": %s, ", yes(c->cuda.loaded));
	key("library", c->cuda.library, ", ");
	key("path", c->cuda.path, ", ");
	printf("\"version\": %d, \"gpus\": [", c->cuda.version);
	for (int i = 0; i < c->cuda.ngpus && i < CHECK_GPUS; i++) {
		printf("%s{", i ? ", " : "");
		key("name", c->cuda.gpus[i].name, ", ");
		printf("\"memory\": %zu}", c->cuda.gpus[i].mem);
	}
	printf("], \"allocation_and_copy\": %s, ", yes(c->cuda.copies));
	key("error", c->cuda.error, "},\n  \"settings\": [");
	for (size_t i = 0; i < hml_nsettings; i++) {
		printf("%s\n    {", i ? "," : "");
		key("name", hml_settings[i].name, ", ");
		key("value", hml_config_value(i), ", ");
		key("source", source(i), "}");
	}
	printf("],\n  \"library\": {\"loaded\": %s, ", yes(c->lib.loaded));
	key("path", c->lib.path, ", ");
	key("version", c->lib.version, ", ");
	key("error", c->lib.error, "},\n");
	printf("  \"interception\": %s,\n  ", yes(c->works));
	key("why", c->why, "\n}\n");
}
