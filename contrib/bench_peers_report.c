/* SPDX-License-Identifier: BSD-2-Clause */
/* hmemloop-bench --peers: the tables, the reasons, the CSV. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench_peers.h"

static void cell(const struct b_point *p, char *out, size_t len)
{
	if (p->status == P_OK)
		snprintf(out, len, "%9.2f %8.2f", p->lat.median * 1e6, p->gbps);
	else
		snprintf(out, len, "%18s", b_status_name[p->status]);
}

/* Why a path has points that are not ok: each reason once. */
static void notes(void)
{
	char sz[32];

	for (int p = 0; p < b_pr.npaths; p++) {
		const char *last = "";

		if (b_pr.note[p][0])
			printf("%s: %s\n", b_pr.paths[p], b_pr.note[p]);
		for (int op = 0; op < NOPS; op++)
			for (int s = 0; s < b_pr.nsizes; s++) {
				struct b_point *x = &b_pr.res[p][op][s];

				if (x->status == P_OK || !strcmp(x->note, last))
					continue;
				printf("%s, %s from %s: %s: %s\n",
				       b_pr.paths[p], b_op_name[op],
				       b_size_str(b_pr.sizes[s], sz, sizeof(sz)),
				       b_status_name[x->status], x->note);
				last = x->note;
			}
	}
}

void b_peers_report(void)
{
	char sz[32], c[64];

	for (int op = 0; op < NOPS; op++) {
		printf("\n== %s, %s ==\n%-8s", b_op_name[op],
		       op == OP_READ ? "B's buffer to A's" : "A's buffer to B's",
		       "size");
		for (int p = 0; p < b_pr.npaths; p++) {
			snprintf(c, sizeof(c), "%s%s", b_pr.paths[p],
				 b_pr.host[p] ? ", host" : "");
			printf(" | %-18.18s", c);
		}
		printf("\n%-8s", "");
		for (int p = 0; p < b_pr.npaths; p++)
			printf(" | %9s %8s", "lat us", "GB/s");
		printf("\n");
		for (int s = 0; s < b_pr.nsizes; s++) {
			printf("%-8s", b_size_str(b_pr.sizes[s], sz, sizeof(sz)));
			for (int p = 0; p < b_pr.npaths; p++) {
				cell(&b_pr.res[p][op][s], c, sizeof(c));
				printf(" | %s", c);
			}
			printf("\n");
		}
	}
	notes();
}

void b_peers_csv(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		b_die("%s: %s", path, strerror(errno));
	fprintf(f, "path,memory,op,size,status,lat_us,lat_p99_us,gbps,"
		"note\n");
	for (int p = 0; p < b_pr.npaths; p++)
		for (int op = 0; op < NOPS; op++)
			for (int s = 0; s < b_pr.nsizes; s++) {
				struct b_point *x = &b_pr.res[p][op][s];

				fprintf(f, "\"%s\",%s,%s,%zu,%s,%.3f,%.3f,"
					"%.4f,\"%s\"\n", b_pr.paths[p],
					b_pr.host[p] ? "host" : "device",
					b_op_name[op], b_pr.sizes[s],
					b_status_name[x->status],
					x->lat.median * 1e6, x->lat.p99 * 1e6,
					x->gbps, x->note);
			}
	if (fclose(f))
		b_die("%s: %s", path, strerror(errno));
	printf("CSV: %s\n", path);
}

