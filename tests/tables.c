/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Prints whether two endpoints of one domain share their op tables, as
 * providers make them, or have tables of their own, as hmemloop makes them
 * when it is enabled. tests/enable-tables runs it with and without
 * hmemloop, as a program and from a plugin opened RTLD_LOCAL
 * (tests/dlopen.c).
 */
#include <stdio.h>

#include "hmltest.h"

int tables_main(int argc, char **argv);

static void tables(void)
{
	struct t_fabric f;
	struct t_ep a, b;
	bool shared, private;

	t_open(&f, NULL);
	t_ep_open(&a, &f, NULL);
	t_ep_open(&b, &f, NULL);
	shared = a.ep->fid.ops == b.ep->fid.ops && a.ep->ops == b.ep->ops &&
		 a.ep->cm == b.ep->cm && a.cq->ops == b.cq->ops &&
		 a.av->ops == b.av->ops;
	private = a.ep->fid.ops != b.ep->fid.ops && a.ep->ops != b.ep->ops &&
		  a.ep->cm != b.ep->cm && a.cq->fid.ops != b.cq->fid.ops &&
		  a.av->ops != b.av->ops;
	t_assert(shared || private, "some tables shared, some not");
	printf("tables: %s\n", shared ? "shared" : "private");
	t_ep_close(&a);
	t_ep_close(&b);
	t_close(&f);
}

static const struct t_case cases[] = {
	T_CASE("tables", tables),
};

/* Its one line is the output, compared whole: a run of its own, not a
 * case, which would add its time. */
static const struct t_prog prog = {
	.cases = cases,
	.n = sizeof(cases) / sizeof(cases[0]),
	.run = tables,
};

/* main, here and in the plugin. */
int tables_main(int argc, char **argv)
{
	return t_main(argc, argv, &prog);
}
