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

int tables_main(int argc, char **argv)
{
	struct t_fabric f;
	struct t_ep a, b;
	bool shared, private;

	t_init(argc, argv, NULL);
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
	return 0;
}
